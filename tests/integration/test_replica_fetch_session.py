"""A follower's fetch session (ReplicaFetch) against a real broker: answers in request order, a parked
fetch answered when data arrives, and a session to a leader that stops answering ends instead of hanging."""
import time

import pytest

from eoslab.v1 import broker_pb2
from services.broker import replica_fetcher
from services.broker.replica_fetcher import FetchSession
from tests import helpers as h

pytestmark = pytest.mark.integration


def _req(offset: int, wait_ms: int) -> broker_pb2.FetchRequest:
    # replica_id -1: read as a consumer would, so the test moves no follower position of the cluster
    return broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=wait_ms, max_bytes=1 << 20, partitions=[
        broker_pb2.FetchPartition(topic="rf", partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])


def _records(resp) -> int:
    return sum(b.record_count for p in resp.partitions for b in p.batches)


def test_session_answers_in_order_and_parks_until_data(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0)
    md = h.new_topic(rt.bootstrap_all(), "rf", partitions=1)
    leader = h.leader_address(md, "rf")
    pid, epoch = h.init_pid(leader)
    assert h.produce_raw(leader, "rf", h.batch(pid, epoch, 0, 4)).error == 0
    s = FetchSession(h.broker_stub(leader), "test")
    try:
        first = s.fetch(_req(0, 0))
        assert first.partitions[0].error == 0 and _records(first) == 4
        assert first.partitions[0].high_watermark == 4
        t0 = time.monotonic()
        empty = s.fetch(_req(4, 300))           # nothing past 4: answered empty when its wait ends
        assert _records(empty) == 0 and time.monotonic() - t0 >= 0.25

        # a parked fetch is answered by the next write, long before its 10 s wait
        import threading
        got = {}
        th = threading.Thread(target=lambda: got.update(r=s.fetch(_req(4, 10_000))))
        th.start()
        time.sleep(0.3)
        assert th.is_alive()
        t1 = time.monotonic()
        assert h.produce_raw(leader, "rf", h.batch(pid, epoch, 4, 2, start=4)).error == 0
        th.join(5)
        assert not th.is_alive() and _records(got["r"]) == 2 and time.monotonic() - t1 < 5
        assert not s.closed
    finally:
        s.close()


def test_session_to_a_paused_leader_ends_instead_of_hanging(make_cluster, monkeypatch):
    monkeypatch.setattr(replica_fetcher, "FETCH_TIMEOUT_S", 1.0)
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0)
    md = h.new_topic(rt.bootstrap_all(), "rf", partitions=1)
    leader = h.leader_address(md, "rf")
    node = next(n.name for n in rt.info().by_role("broker") if n.address == leader)
    s = FetchSession(h.broker_stub(leader), "test")
    rt.pause(node)
    try:
        t0 = time.monotonic()
        with pytest.raises(Exception):
            s.fetch(_req(0, 100))
        took = time.monotonic() - t0
        assert s.closed
        assert 0.9 <= took < 4.0, took          # the watchdog looks once a second
    finally:
        rt.resume(node)
        s.close()
    # a new session works once the leader runs again
    s2 = FetchSession(h.broker_stub(leader), "test")
    try:
        assert s2.fetch(_req(0, 0)).partitions[0].error == 0
    finally:
        s2.close()


def test_partitions_answered_with_errors_do_not_hold_up_the_others(make_cluster, tmp_path):
    """One fetch to a leader for a partition it serves and 40 it does not know: the good partition's
    batches are appended and the fetch returns at once; each failed partition sits out a backoff of
    its own (as Kafka's fetcher delays a partition with an error) instead of the fetcher sleeping
    50 ms per failed partition before it fetches again."""
    from services.broker.log_config import LogConfig
    from services.broker.partition import Partition
    from services.broker.replica_fetcher import (PartitionFetchState, ReplicaFetcherManager, ReplicaFetcherThread,
                                                ReplicaState)
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0)
    md = h.new_topic(rt.bootstrap_all(), "rf", partitions=1)
    leader = h.leader_address(md, "rf")
    leader_id, _, epoch = md.leader("rf", 0)
    pid, pepoch = h.init_pid(leader)
    assert h.produce_raw(leader, "rf", h.batch(pid, pepoch, 0, 4)).error == 0
    # replica id -1 (the manager's broker id): read as a consumer, so no follower position of the cluster moves
    manager = ReplicaFetcherManager(-1, lambda _: leader)
    fetcher = ReplicaFetcherThread(manager, leader_id)
    good = Partition("rf", 0, str(tmp_path / "rf-0"), broker_id=-1, config=LogConfig())
    parts = {("rf", 0): PartitionFetchState(good, epoch, ReplicaState.FETCHING)}
    for i in range(40):
        parts[("absent", i)] = PartitionFetchState(Partition("absent", i, str(tmp_path / f"absent-{i}"), broker_id=-1,
                                                             config=LogConfig()), 0, ReplicaState.FETCHING)
    fetcher.partitions.update(parts)       # the thread's own states: an answer for a state it no longer holds is dropped
    try:
        t0 = time.monotonic()
        fetcher._fetch(h.broker_stub(leader), parts)
        took = time.monotonic() - t0
        assert good.log_end_offset == 4
        assert took < 1.0, took                       # 40 failed partitions x 50 ms would be 2 s
        later = time.monotonic()
        assert all(st.retry_at > later - 1.0 for tp, st in parts.items() if tp[0] == "absent")
        assert parts[("rf", 0)].retry_at == 0.0
    finally:
        fetcher.close_session()
        manager.shutdown()
        for st in parts.values():
            st.partition.close()
