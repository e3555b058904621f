"""The consumer's time rules on a MockTime: group heartbeats, the group calls' timeouts, the fetch
backoff and poll's timeout.

The consumer and its ConsumerCoordinator are built in-process on fakes of the metadata and the
broker stubs (no cluster). The rules:
- heartbeat.interval.ms: after joining (or a heartbeat) the member sends no heartbeat before the
  interval has passed, and sends one at it (Kafka's Heartbeat.shouldHeartbeat);
- JoinGroup is retried until the join timeout of the clock, then REBALANCE_IN_PROGRESS is raised;
- committed() waits while the broker answers UNSTABLE_OFFSET_COMMIT, for its timeout of the clock;
- retry.backoff.ms: a leader whose fetch failed gets no fetch before the backoff has passed, and a
  poll with every leader backing off waits on the clock instead of spinning;
- poll(timeout_ms) with a fetch in flight returns when that many ms of the clock have passed, not
  before (however much real time passes).
The client has no max.poll.interval.ms rule (heartbeats go out only from poll; the coordinator's
session timeout drops a member that stops polling), so there is nothing of it to test here.
No test sleeps: the clock moves only when a test (or a fake broker that long-polls) moves it.
"""
import threading

import grpc
import pytest

from clients.consumer import KafkaConsumer
from clients.group import ConsumerCoordinator
from eoslab.common import record_batch as rb
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2

pytestmark = pytest.mark.fast
TP = ("t", 0)
LEADER = "b1:9092"


class FakeGroupBroker:
    """Metadata, FindCoordinator and the group coordinator's answers in one fake."""

    def __init__(self, clock):
        self.clock = clock
        self.channels = self
        self.heartbeats: list[float] = []
        self.heartbeat_error = E.NONE
        self.join_error = E.NONE
        self.join_takes = 0.0               # seconds of the clock a JoinGroup holds (the broker's wait)
        self.joins = 0
        self.stable_at = None               # OffsetFetch answers UNSTABLE_OFFSET_COMMIT until this time
        self.offset_fetches: list[float] = []

    def addresses(self):
        return [LEADER]

    def stub(self, address, cls=None):
        return self

    def partitions_for(self, topic):
        return 1

    def FindCoordinator(self, req, timeout):
        return broker_pb2.FindCoordinatorResponse(error=E.NONE, host="b1", port=9092, node_id=1)

    def JoinGroup(self, req, timeout):
        self.joins += 1
        assert self.joins < 1000, "JoinGroup retried without end"
        self.clock.advance(self.join_takes)
        return broker_pb2.JoinGroupResponse(error=self.join_error, generation_id=1, leader="other",
                                            member_id="m1")

    def SyncGroup(self, req, timeout):
        return broker_pb2.SyncGroupResponse(error=E.NONE, assignment=[common_pb2.TopicPartition(topic="t",
                                                                                                partition=0)])

    def Heartbeat(self, req, timeout):
        self.heartbeats.append(self.clock.monotonic())
        return broker_pb2.HeartbeatResponse(error=self.heartbeat_error)

    def OffsetFetch(self, req, timeout):
        self.offset_fetches.append(self.clock.monotonic())
        assert len(self.offset_fetches) < 10_000, "OffsetFetch retried without end"
        if self.stable_at is None or self.clock.monotonic() < self.stable_at:
            return broker_pb2.OffsetFetchResponse(error=E.UNSTABLE_OFFSET_COMMIT)
        return broker_pb2.OffsetFetchResponse(error=E.NONE, partitions=[
            broker_pb2.OffsetFetchPartition(topic="t", partition=0, offset=42)])


def member(heartbeat_interval_ms=500):
    clock = MockTime()
    broker = FakeGroupBroker(clock)
    g = ConsumerCoordinator(broker, "g", heartbeat_interval_ms=heartbeat_interval_ms, time=clock)
    g.topics = ["t"]
    return clock, broker, g


# -- group membership ---------------------------------------------------------------------------------
def test_no_heartbeat_before_the_interval_and_one_at_it():
    clock, broker, g = member(heartbeat_interval_ms=500)
    assert g.join() == [TP]
    joined = clock.monotonic()
    clock.advance(0.499)
    g.maybe_heartbeat()
    assert broker.heartbeats == []
    clock.advance(0.001)
    g.maybe_heartbeat()
    assert broker.heartbeats == [joined + 0.5]
    clock.advance(0.499)
    g.maybe_heartbeat()
    assert len(broker.heartbeats) == 1                   # the interval counts from the last heartbeat
    clock.advance(0.001)
    g.maybe_heartbeat()
    assert len(broker.heartbeats) == 2


def test_a_heartbeat_answered_rebalance_in_progress_makes_the_member_rejoin():
    clock, broker, g = member()
    g.join()
    broker.heartbeat_error = E.REBALANCE_IN_PROGRESS
    clock.advance(0.5)
    g.maybe_heartbeat()
    assert g.need_rejoin()


def test_join_gives_up_after_its_timeout_of_the_clock():
    clock, broker, g = member()
    broker.join_error, broker.join_takes = E.REBALANCE_IN_PROGRESS, 1.0   # each JoinGroup holds 1 s
    start = clock.monotonic()
    with pytest.raises(KafkaError) as e:
        g.join(timeout=5.0)
    assert e.value.code == E.REBALANCE_IN_PROGRESS
    assert broker.joins == 5 and clock.monotonic() - start == pytest.approx(5.0)


def test_committed_waits_while_unstable_for_its_timeout_of_the_clock():
    clock, broker, g = member()
    start = clock.monotonic()
    with pytest.raises(KafkaError) as e:
        g.committed([TP], timeout=1.0)
    assert e.value.code == E.UNSTABLE_OFFSET_COMMIT
    assert 1.0 < broker.offset_fetches[-1] - start <= 1.05 + 1e-9    # asked again every 50 ms until then
    broker.offset_fetches.clear()
    broker.stable_at = clock.monotonic() + 0.3
    assert g.committed([TP], timeout=1.0) == {TP: 42}
    assert 0.3 <= broker.offset_fetches[-1] - broker.offset_fetches[0] < 0.35


# -- fetches ------------------------------------------------------------------------------------------
class Unavailable(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE


class FakeFetch:
    """A Fetch call's future, answered when the test (or the fake leader) says."""

    def __init__(self):
        self._callbacks, self._done, self._resp, self._error = [], False, None, None

    def add_done_callback(self, fn):
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def finish(self, resp=None, error=None):
        self._done, self._resp, self._error = True, resp, error
        for fn in self._callbacks:
            fn(self)

    def result(self):
        if self._error is not None:
            raise self._error
        return self._resp

    def cancel(self):
        return False


class FakeLeader:
    """Metadata whose every partition is led by LEADER; Fetch.future records when each fetch went out.
    With `long_poll`, a fetch holds for its max_wait_ms of the clock and answers empty, as a broker does."""

    def __init__(self, clock, long_poll=False):
        self.clock, self.long_poll = clock, long_poll
        self.fetches: list[tuple[float, FakeFetch]] = []
        self.Fetch = self

    def leader(self, topic, partition):
        return (1, LEADER, 0)

    def refresh(self, topics=None):
        return None

    def stub(self, address):
        return self

    def close(self):
        return None

    def future(self, req, timeout):
        call = FakeFetch()
        self.fetches.append((self.clock.monotonic(), call))
        if self.long_poll:
            self.clock.advance(req.max_wait_ms / 1000)
            call.finish(broker_pb2.FetchResponse(partitions=[
                broker_pb2.FetchPartitionResponse(topic=p.topic, partition=p.partition, error=E.NONE)
                for p in req.partitions]))
        return call


def consumer(long_poll=False, retry_backoff_ms=100):
    clock = MockTime()
    c = KafkaConsumer("127.0.0.1:1", retry_backoff_ms=retry_backoff_ms, time=clock)
    c.metadata.close()
    c.metadata = FakeLeader(clock, long_poll)
    c.assign([TP])
    c.seek(TP, 5)
    return clock, c


def fail_first_fetch(clock, c) -> float:
    c._send_fetches(500)
    [(_, call)] = c.metadata.fetches
    call.finish(error=Unavailable())
    for answered in c._take_answered(0):
        c._complete(answered, [])
    return clock.monotonic()


def test_a_leader_whose_fetch_failed_gets_no_fetch_before_retry_backoff():
    clock, c = consumer(retry_backoff_ms=100)
    failed_at = fail_first_fetch(clock, c)
    c._send_fetches(500)
    clock.advance(0.099)
    c._send_fetches(500)
    assert len(c.metadata.fetches) == 1
    clock.advance(0.002)
    c._send_fetches(500)
    assert [at for at, _ in c.metadata.fetches] == [failed_at, failed_at + 0.101]


def test_a_poll_with_every_leader_backing_off_waits_on_the_clock():
    clock, c = consumer(retry_backoff_ms=100)
    failed_at = fail_first_fetch(clock, c)
    c.metadata.long_poll = True
    assert c.poll(timeout_ms=50) == []
    assert len(c.metadata.fetches) == 1 and clock.monotonic() == pytest.approx(failed_at + 0.05)
    c.poll(timeout_ms=1000)
    assert c.metadata.fetches[1][0] - failed_at >= 0.1               # not before the backoff


def test_poll_returns_after_its_timeout_of_the_clock_and_not_before():
    clock, c = consumer()
    box = []
    th = threading.Thread(target=lambda: box.append(c.poll(timeout_ms=60_000)), daemon=True)
    th.start()
    th.join(0.3)
    assert th.is_alive() and len(c.metadata.fetches) == 1           # a fetch in flight, no answer yet
    clock.advance(59.9)
    th.join(0.1)
    assert th.is_alive()
    clock.advance(0.1)
    th.join(10)
    assert not th.is_alive() and box == [[]]


class OfflineThenBack(FakeLeader):
    """A partition with no leader until `back_at` on the clock (a leader killed with the whole ISR)."""

    def __init__(self, clock, back_at):
        super().__init__(clock)
        self.back_at = back_at

    def leader(self, topic, partition):
        return (1, LEADER, 0) if self.clock.monotonic() >= self.back_at else None

    def ListOffsets(self, req, timeout):
        return broker_pb2.ListOffsetsResponse(partitions=[broker_pb2.ListOffsetsPartitionResponse(
            topic=p.topic, partition=p.partition, error=E.NONE, offset=42) for p in req.partitions])


def test_end_offsets_wait_for_a_partition_without_a_leader_up_to_default_api_timeout():
    clock, c = consumer()
    c.metadata = OfflineThenBack(clock, back_at=clock.monotonic() + 30)     # back after 30 s of the clock
    assert c.end_offsets([TP]) == {TP: 42}
    c.metadata = OfflineThenBack(clock, back_at=clock.monotonic() + 120)    # longer than default.api.timeout.ms
    with pytest.raises(KafkaError) as e:
        c.end_offsets([TP])
    assert e.value.code == E.LEADER_NOT_AVAILABLE


class OneGoodOneBad(FakeLeader):
    """Each fetch answers records for the first partition and an error for the second."""

    def future(self, req, timeout):
        call = FakeFetch()
        self.fetches.append((self.clock.monotonic(), call))
        by_number = {p.partition: p for p in req.partitions}
        good, bad = by_number[0], by_number[1]
        batch = rb.build_batch([(None, b"a", 0), (None, b"b", 0)])
        batch.base_offset = good.fetch_offset
        parts = {good.partition: broker_pb2.FetchPartitionResponse(
                     topic=good.topic, partition=good.partition, error=E.NONE, high_watermark=100, batches=[batch]),
                 bad.partition: broker_pb2.FetchPartitionResponse(
                     topic=bad.topic, partition=bad.partition, error=E.CORRUPT_MESSAGE)}
        call.finish(broker_pb2.FetchResponse(partitions=[parts[0], parts[1]]))    # the bad one after
        return call


def test_records_fetched_with_another_partitions_error_are_returned_not_lost():
    """Kafka's Fetcher: a poll returns the records it has and leaves a partition's error to a poll that
    has none. Raising at once lost the records already taken (their positions had moved): the history
    then showed a poll-skip the cluster never made."""
    clock = MockTime()
    c = KafkaConsumer("127.0.0.1:1", time=clock)
    c.metadata.close()
    c.metadata = OneGoodOneBad(clock)
    c.assign([("t", 0), ("t", 1)])
    c.seek(("t", 0), 5)
    c.seek(("t", 1), 7)
    got = c.poll(timeout_ms=100)
    assert [(r.partition, r.offset) for r in got] == [(0, 5), (0, 6)]
    assert c.positions == {("t", 0): 7, ("t", 1): 7}
    with pytest.raises(KafkaError):                  # the next poll: partition 0 again has records, so ...
        c.metadata.future = lambda req, timeout: _only_error(c.metadata, req)
        c.poll(timeout_ms=100)
    assert c.positions == {("t", 0): 7, ("t", 1): 7}


def _only_error(leader, req):
    call = FakeFetch()
    leader.fetches.append((leader.clock.monotonic(), call))
    call.finish(broker_pb2.FetchResponse(partitions=[broker_pb2.FetchPartitionResponse(
        topic=p.topic, partition=p.partition, error=E.CORRUPT_MESSAGE) for p in req.partitions]))
    return call
