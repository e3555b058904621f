"""flush() and the end of a transaction wait for every batch, wherever the Sender has it.

A copier under a ZooKeeper kill once committed a transaction while one of its batches was between two
places: the Sender had taken it out of flight to retry it and not yet put it back in the accumulator.
flush() looked at the in-flight set, then at the accumulator, missed it, and EndTxn(commit) went out.
The batch then went out again in the next epoch and was committed with the next transaction, whose own
first batch (same epoch, same sequence 0) was answered as its duplicate: a lost write. Kafka's producer
cannot do this: its RecordAccumulator keeps every batch in `incomplete` from creation to completion, and
a transactional batch is never retried under another producer epoch (Sender.completeBatch).

The windows are reproduced exactly by running flush() at the moment the Sender is inside them.
"""
from types import SimpleNamespace

import pytest

from clients.producer.kafka_producer import KafkaProducer
from clients.producer.transaction_manager import TransactionManager
from eoslab.common.errors import E, KafkaError
from tests.unit.test_client_clock_producer import Rig

pytestmark = pytest.mark.fast
TP = ("t", 0)


def flush(rig, timeout=0.0) -> bool:
    """KafkaProducer.flush on the rig's accumulator and Sender (it reads nothing else of the producer)."""
    return KafkaProducer.flush(SimpleNamespace(accumulator=rig.acc, sender=rig.sender, time=rig.time), timeout)


def test_flush_waits_for_a_batch_drained_but_not_yet_in_flight(monkeypatch):
    rig = Rig(monkeypatch)
    fut = rig.send()
    seen = []
    pop = rig.acc.pop

    def pop_then_flush(tp):          # the Sender has the batch in hand, building its request
        b = pop(tp)
        seen.append(flush(rig))
        return b
    monkeypatch.setattr(rig.acc, "pop", pop_then_flush)
    rig.run()
    assert seen == [False]
    rig.answer(rig.requests()[0], base_offset=4)
    assert fut.result(0).offset == 4 and flush(rig) is True


def test_flush_waits_for_a_batch_taken_out_of_flight_to_be_retried(monkeypatch):
    rig = Rig(monkeypatch, retry_backoff_ms=100)
    fut = rig.send()
    rig.run()
    seen = []
    reenqueue = rig.acc.reenqueue

    def flush_then_reenqueue(b):     # out of the in-flight set, not yet back in the accumulator
        seen.append(flush(rig))
        reenqueue(b)
    monkeypatch.setattr(rig.acc, "reenqueue", flush_then_reenqueue)
    rig.answer(rig.requests()[0], E.NOT_LEADER_OR_FOLLOWER)
    assert seen == [False] and not fut.done()
    rig.time.advance(0.2)
    rig.run()
    rig.answer(rig.requests()[1], base_offset=9)
    assert fut.result(0).offset == 9 and flush(rig) is True and rig.acc.incomplete_batches() == []


def test_a_failed_batch_no_longer_holds_a_flush(monkeypatch):
    rig = Rig(monkeypatch, retries=0)
    fut = rig.send()
    rig.run()
    rig.answer(rig.requests()[0], E.NOT_LEADER_OR_FOLLOWER)
    assert isinstance(fut.exception(0), KafkaError) and flush(rig) is True


def transactional_rig(monkeypatch, **cfg) -> Rig:
    rig = Rig(monkeypatch, transactional_id="tx-1", **cfg)
    rig.tm = rig.sender.tm = TransactionManager(True, "tx-1", rig.config.version)
    rig.tm.begin_init()
    rig.tm.complete_init(1000, 0)
    rig.tm.begin_transaction()
    rig.tm.maybe_add_partition(TP)
    rig.tm.partitions_added({TP})
    return rig


def test_a_transactional_batch_is_not_retried_under_a_later_epoch(monkeypatch):
    rig = transactional_rig(monkeypatch, retry_backoff_ms=100)
    fut = rig.send()
    rig.run()
    [req] = rig.requests()
    assert req.partitions[0].batch.producer_epoch == 0
    rig.tm.set_producer_id(1000, 1)          # its transaction ended; EndTxn gave the next epoch (KIP-890)
    rig.answer(req, E.NOT_LEADER_OR_FOLLOWER)
    assert isinstance(fut.exception(0), KafkaError) and fut.exception(0).code == E.NOT_LEADER_OR_FOLLOWER
    rig.time.advance(0.2)
    rig.run()
    assert len(rig.requests()) == 1          # not sent again as epoch 1, sequence 0


def test_a_transactional_batch_is_retried_within_its_epoch(monkeypatch):
    rig = transactional_rig(monkeypatch, retry_backoff_ms=100)
    fut = rig.send()
    rig.run()
    rig.answer(rig.requests()[0], E.NOT_LEADER_OR_FOLLOWER)
    rig.time.advance(0.2)
    rig.run()
    again = rig.requests()[1].partitions[0].batch
    assert (again.producer_epoch, again.base_sequence) == (0, 0)
    rig.answer(rig.requests()[1], base_offset=2)
    assert fut.result(0).offset == 2
