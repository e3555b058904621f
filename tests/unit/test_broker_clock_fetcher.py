"""The follower's fetcher on a mock clock: the fetch session's answer deadline (FETCH_TIMEOUT_S,
checked by a watchdog every WATCHDOG_CHECK_S) and a failed partition's backoff
(PARTITION_BACKOFF_S, Kafka's delay of a partition with an error).

Guarantees checked: a fetch the leader does not answer ends the session once FETCH_TIMEOUT_S of
the broker's clock have passed (within one watchdog check), not before, and an answered fetch
leaves the session open however long the fetcher then stays idle; a partition answered with an
error sits out the fetches until its backoff has passed on the clock while the leader's other
partitions go on being fetched. The leader is a fake in-process stub; no test sleeps.
"""
import threading
from types import SimpleNamespace

import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.replica_fetcher import (FETCH_TIMEOUT_S, PARTITION_BACKOFF_S, WATCHDOG_CHECK_S, FetchSession,
                                             ReplicaFetcherThread, ReplicaState, SessionClosed)
from tests.unit.test_broker_clock_support import REAL_TIMEOUT_S, WatchedClock, start, until

pytestmark = pytest.mark.fast
MS = 0.001


class FakeLeader:
    """The leader's end of ReplicaFetch streams: `answer(request, call)` gives each answer."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[broker_pb2.FetchRequest] = []

    def ReplicaFetch(self, requests):   # noqa: N802 - the gRPC stub's name
        return FakeCall(self, requests)


class FakeCall:
    def __init__(self, leader, requests):
        self.leader, self.requests, self.cancelled = leader, requests, threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        req = next(self.requests)             # the session's next request (StopIteration once it closed)
        self.leader.requests.append(req)
        return self.leader.answer(req, self)

    def cancel(self):
        self.cancelled.set()


def never_answers(req, call):
    if not call.cancelled.wait(6 * REAL_TIMEOUT_S):      # far beyond what the test waits for
        raise RuntimeError("the session was never closed")
    raise StopIteration                                  # a cancelled stream ends


def empty_answer(req, call):
    return broker_pb2.FetchResponse()


def fetch_request():
    return broker_pb2.FetchRequest(replica_id=2, partitions=[broker_pb2.FetchPartition(topic="t", partition=0)])


def test_an_unanswered_fetch_ends_the_session_at_the_fetch_timeout():
    clock, leader = WatchedClock(), FakeLeader(never_answers)
    session = FetchSession(leader, "s", clock)
    clock.await_waiting("s-watchdog")
    call = start("fetch", lambda: session.fetch(fetch_request()))
    until(lambda: leader.requests, "the request to reach the leader")   # its deadline is set before it is sent
    clock.advance(FETCH_TIMEOUT_S - MS)
    call[0].join(0.1)
    assert call[0].is_alive() and not session.closed
    clock.advance(WATCHDOG_CHECK_S + MS)
    call[0].join(REAL_TIMEOUT_S)
    assert isinstance(call[1].get("error"), SessionClosed) and session.closed


def test_an_answered_fetch_leaves_the_session_open_while_the_fetcher_is_idle():
    clock = WatchedClock()
    session = FetchSession(FakeLeader(empty_answer), "s", clock)
    try:
        assert session.fetch(fetch_request()) == broker_pb2.FetchResponse()
        for _ in range(3):
            clock.step("s-watchdog", FETCH_TIMEOUT_S)
        assert not session.closed
    finally:
        session.close()


@pytest.fixture
def fetcher(tmp_path):
    """A fetcher (not started: the test runs its rounds) of t-0 and t-1 from leader 1, whose fake answers
    t-0 NOT_LEADER_OR_FOLLOWER and t-1 nothing."""
    clock = WatchedClock()

    def answer(req, call):
        resp = broker_pb2.FetchResponse()
        for fp in req.partitions:
            resp.partitions.add(topic=fp.topic, partition=fp.partition, high_watermark=0,
                                error=E.NOT_LEADER_OR_FOLLOWER if fp.partition == 0 else E.NONE)
        return resp
    leader = FakeLeader(answer)
    manager = SimpleNamespace(broker_id=2, time=clock, broker_address=lambda _: "leader:1",
                              channels=SimpleNamespace(stub=lambda addr, cls: leader))
    th = ReplicaFetcherThread(manager, 1)
    parts = []
    for i in (0, 1):
        p = Partition("t", i, str(tmp_path), broker_id=2, config=LogConfig(), time=clock)
        p.make_follower(1, 0, [1, 2], [1, 2], 0)
        th.add(p, 0)
        th.partitions[("t", i)].transition_to(ReplicaState.FETCHING)     # past truncation: every round fetches
        parts.append(p)

    def round_() -> list[int]:
        th.do_work()
        return sorted(fp.partition for fp in leader.requests[-1].partitions)
    yield round_, clock, leader
    th.stop()
    for p in parts:
        p.close()


def test_a_partition_with_an_error_sits_out_its_backoff_while_the_others_are_fetched(fetcher):
    round_, clock, _ = fetcher
    assert round_() == [0, 1]                  # t-0 answers NOT_LEADER_OR_FOLLOWER
    assert round_() == [1]
    clock.advance(PARTITION_BACKOFF_S - MS)
    assert round_() == [1]
    clock.advance(2 * MS)
    assert round_() == [0, 1]                  # its backoff is over: fetched (and failed) again
    assert round_() == [1]


def test_fetch_state_goes_truncating_then_fetching_and_back_only():
    from services.broker.replica_fetcher import PartitionFetchState

    class P:
        topic, partition = "t", 0
    st = PartitionFetchState(P(), 3)
    assert st.state is ReplicaState.TRUNCATING and st.is_ready(0.0)
    with pytest.raises(RuntimeError):
        st.transition_to(ReplicaState.TRUNCATING)          # already truncating
    st.transition_to(ReplicaState.FETCHING)
    st.transition_to(ReplicaState.TRUNCATING)              # OFFSET_OUT_OF_RANGE sends it back
    st.delay(10.0, 0.05)
    assert not st.is_ready(10.04) and st.is_ready(10.05)


def test_the_partitions_order_rotates_so_none_always_comes_last(fetcher):
    """The leader fills its byte limits in request order (only the first partition with data may exceed
    them), so a fixed order could starve the last partition; Kafka's fetcher moves a fetched one to the end."""
    round_, clock, leader = fetcher
    firsts = set()
    for _ in range(2):
        clock.advance(PARTITION_BACKOFF_S + MS)       # t-0's error backoff over: both are fetched each round
        round_()
        firsts.add(leader.requests[-1].partitions[0].partition)
    assert firsts == {0, 1}
