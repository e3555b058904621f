"""The leader's view of a follower (Replica) and the ISR it leads to on a real Partition, checked
against Kafka's rules (kafka.cluster.Replica, Partition.getOutOfSyncReplicas / isFollowerInSync).
The Partition runs on a MockTime: the tests move its clock, they never sleep."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.replica import Replica

pytestmark = pytest.mark.fast


def test_a_fetch_to_the_leaders_end_is_caught_up_at_that_fetch():
    r = Replica.for_new_leader(now=0.0, in_sync=True)
    r.update_fetch_state(fetch_offset=10, fetch_time=5.0, leader_end=10)
    assert (r.log_end_offset, r.last_caught_up, r.last_fetch_time, r.last_fetch_leader_end) == (10, 5.0, 5.0, 10)


def test_a_fetch_to_the_previous_fetchs_leader_end_is_caught_up_at_the_previous_fetch():
    r = Replica.for_new_leader(now=0.0, in_sync=True)
    r.update_fetch_state(fetch_offset=5, fetch_time=1.0, leader_end=10)
    assert r.last_caught_up == 0.0                # behind the end, and nothing known of an earlier fetch
    r.update_fetch_state(fetch_offset=10, fetch_time=2.0, leader_end=15)
    assert r.last_caught_up == 1.0                # it reached where the leader was at the fetch at 1.0
    r.update_fetch_state(fetch_offset=12, fetch_time=3.0, leader_end=20)
    assert r.last_caught_up == 1.0                # 12 < 15: not even the previous end
    assert r.last_fetch_leader_end == 20


def test_caught_up_at_the_leaders_end_whatever_the_time():
    r = Replica.for_new_leader(now=0.0, in_sync=True)
    r.update_fetch_state(fetch_offset=7, fetch_time=1.0, leader_end=7)
    assert r.is_caught_up(leader_end=7, now=100.0, max_lag_s=3.0)
    assert not r.is_caught_up(leader_end=8, now=100.0, max_lag_s=3.0)
    assert r.is_caught_up(leader_end=8, now=3.5, max_lag_s=3.0)


def test_times_restart_on_a_leader_change():
    assert Replica.for_new_leader(now=9.0, in_sync=True).last_caught_up == 9.0
    assert Replica.for_new_leader(now=9.0, in_sync=False).last_caught_up == 0.0
    r = Replica.for_new_leader(now=0.0, in_sync=True)
    r.update_fetch_state(fetch_offset=4, fetch_time=1.0, leader_end=4)
    kept = r.reset_for_reelection(now=20.0, in_sync=False, leader_end=6)
    assert (kept.log_end_offset, kept.last_caught_up, kept.last_fetch_time, kept.last_fetch_leader_end) == \
        (4, 0.0, 0.0, 6)
    assert r.reset_for_reelection(now=20.0, in_sync=True, leader_end=6).last_caught_up == 20.0


def _leader(tmp_path, lag_ms, clock):
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(replica_lag_time_max_ms=lag_ms), time=clock)
    p.make_leader(0, [1, 2], [1, 2], 0)
    return p


def _append(p):
    assert p.append_records_to_leader(rb.build_batch([(None, b"x", 0)]), acks=1).error == 0


def test_a_follower_one_fetch_behind_a_stream_of_small_appends_stays_in_the_isr(tmp_path):
    """Every fetch reads up to where the leader ended at the fetch before, never to its current end:
    Kafka keeps that follower in sync; judged by exact catch-up alone it would leave after the lag time."""
    clock = MockTime()
    p = _leader(tmp_path, lag_ms=300, clock=clock)
    try:
        for _ in range(100):                      # 3 s of fetches, 30 ms apart: ten times the lag
            behind = p.log_end_offset
            _append(p)
            p.record_follower_fetch(2, behind)
            assert p.isr_change_wanted() is None
            clock.advance(0.03)
        assert p.isr == [1, 2]
    finally:
        p.close()


def test_a_follower_at_the_leaders_end_stays_in_the_isr_without_fetching(tmp_path):
    """No appends, no fetches for longer than the lag: the follower has the whole log, so it stays."""
    clock = MockTime()
    p = _leader(tmp_path, lag_ms=100, clock=clock)
    try:
        _append(p)
        p.record_follower_fetch(2, p.log_end_offset)
        clock.advance(0.25)
        assert p.isr_change_wanted() is None
        _append(p)                                 # now it lacks a batch and has not caught up for 250 ms
        assert p.isr_change_wanted() == [1]
    finally:
        p.close()


def test_a_follower_rejoins_only_after_fetching_again(tmp_path):
    """Out of the ISR, a follower whose log end reached the high watermark rejoins, as in Kafka on its
    next fetch; one that stopped fetching does not, whatever its log end."""
    clock = MockTime()
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(replica_lag_time_max_ms=100), time=clock)
    p.make_leader(0, [1, 2], [1], 0)
    try:
        _append(p)
        assert p.isr_change_wanted() is None       # follower 2 never fetched
        p.record_follower_fetch(2, p.log_end_offset)
        assert p.isr_change_wanted() == [1, 2]
        clock.advance(0.2)
        assert p.isr_change_wanted() is None       # that fetch is older than the lag now
    finally:
        p.close()
