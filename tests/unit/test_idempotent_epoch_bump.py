"""The idempotent producer's epoch bump on a MockTime (Kafka's bumpIdempotentProducerEpoch and
maybeUpdateProducerIdAndEpoch): only the partition that asked for the bump is renumbered; a batch of
another partition that was sent, maybe written, and is being retried keeps its epoch and sequence, so
the broker deduplicates it instead of writing it twice; that partition's next new batch waits for it
and then starts the new epoch at sequence 0.

The producer's own rig (tests.unit.test_client_clock_producer): Sender, RecordAccumulator and
TransactionManager in-process, the connection a recorder, the broker's answers put on the inbox by the
test."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from tests.unit.test_client_clock_producer import Rig

pytestmark = pytest.mark.fast


def answer(rig, req, errors: dict[int, int], offsets: dict[int, int] | None = None):
    """Answer `req` partition by partition: partition -> error (NONE when not named)."""
    conn = next(c for c in rig.conns if req.correlation_id in c.in_flight)
    conn.inbox.put(("response", conn, broker_pb2.ProduceResponse(
        correlation_id=req.correlation_id,
        partitions=[broker_pb2.PartitionProduceResponse(
            topic=p.topic, partition=p.partition, error=errors.get(p.partition, E.NONE),
            base_offset=(offsets or {}).get(p.partition, 0)) for p in req.partitions])))
    rig.drain()


def sent(req) -> dict[int, tuple[int, int]]:
    """partition -> (epoch, base sequence) of each batch in the request."""
    return {p.partition: (p.batch.producer_epoch, p.batch.base_sequence) for p in req.partitions}


def test_a_bump_asked_by_one_partition_does_not_renumber_another_s_retried_batch(monkeypatch):
    rig = Rig(monkeypatch, request_timeout_ms=1000, retry_backoff_ms=100, max_in_flight=1)
    a = rig.send(partition=0)
    b = rig.send(partition=1)
    rig.run()
    [first] = rig.requests()
    assert sent(first) == {0: (0, 0), 1: (0, 0)}
    # partition 1 fails for good: its later sequences would have a gap, so it asks for an epoch bump
    answer(rig, first, {0: E.NOT_LEADER_OR_FOLLOWER, 1: E.MESSAGE_TOO_LARGE})
    assert b.done() and rig.sender.tm.bump_pending and not a.done()
    rig.time.advance(0.101)
    rig.run()                                   # the bump (nothing in flight), then partition 0's retry
    assert rig.sender.tm.producer_epoch == 1
    retry = rig.requests()[-1]
    assert sent(retry) == {0: (0, 0)}           # epoch 0, sequence 0: the broker can deduplicate it
    # its connection is lost after the broker wrote it: retried again, still as first sent
    rig.time.advance(1.001)
    rig.run()
    rig.time.advance(0.101)
    rig.run()
    again = rig.requests()[-1]
    assert again is not retry and sent(again) == {0: (0, 0)}
    c = rig.send(partition=0)                   # partition 0 is stale: no epoch 1 batch before `a` completes
    d = rig.send(partition=1)                   # partition 1 was renumbered: epoch 1 starts at 0
    rig.run()
    assert rig.requests()[-1] is again
    answer(rig, again, {0: E.DUPLICATE_SEQUENCE_NUMBER})
    assert a.result(0).offset == -1 and rig.sender.stats["duplicate_sequence_acks"] == 1
    rig.run()
    assert sent(rig.requests()[-1]) == {0: (1, 0), 1: (1, 0)}
    answer(rig, rig.requests()[-1], {}, {0: 5, 1: 6})
    assert (c.result(0).offset, d.result(0).offset) == (5, 6)


def test_the_partition_that_asked_for_the_bump_is_renumbered(monkeypatch):
    rig = Rig(monkeypatch, retry_backoff_ms=100, max_in_flight=1)
    first = rig.send(partition=0)
    rig.run()
    later = rig.send(partition=0)
    answer(rig, rig.requests()[0], {0: E.MESSAGE_TOO_LARGE})
    assert first.done() and rig.sender.tm.bump_pending
    rig.run()
    assert rig.sender.tm.producer_epoch == 1 and sent(rig.requests()[-1]) == {0: (1, 0)}
    answer(rig, rig.requests()[-1], {}, {0: 3})
    assert later.result(0).offset == 3
