"""ISR membership by replica.lag.time.max.ms, on a mock clock (Kafka's Replica.isCaughtUp and
Partition.getOutOfSyncReplicas; the lab's rejoin rule), and the ReplicaManager's maintenance loop
that acts on it (the ISR check, the high-watermark checkpoint interval).

Guarantees checked: a follower that has not caught up for longer than the lag leaves the ISR, one
that caught up within it stays, one at the leader's log end stays whatever the time; a new leader
counts its followers' lag from its election; an out-of-sync follower rejoins only with a fetch
within the lag; the maintenance loop asks the controller for the shrink once the lag has passed on
the broker's clock, not before, and checkpoints the high watermark once per interval. No test sleeps:
each moves the partition's MockTime.
"""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.metadata_cache import MetadataCache
from services.broker.checkpoints import HW_CHECKPOINT_INTERVAL_S, read_hw_checkpoint
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.replica_manager import ISR_CHECK_S, ReplicaManager
from tests.unit.test_broker_clock_support import WatchedClock, until

pytestmark = pytest.mark.fast
LAG_MS = 3000
LAG_S = LAG_MS / 1000
MS = 0.001


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def leader(tmp_path, clock):
    """Broker 1 leads t-0 with follower 2; both in the ISR."""
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(replica_lag_time_max_ms=LAG_MS), time=clock)
    p.make_leader(0, [1, 2], [1, 2], 0)
    yield p
    p.close()


def append(p, n=1):
    for _ in range(n):
        assert p.append_records_to_leader(rb.build_batch([(None, b"x", 0)]), acks=1).error == E.NONE


def test_a_follower_not_caught_up_for_longer_than_the_lag_leaves_the_isr(leader, clock):
    append(leader)
    leader.record_follower_fetch(2, leader.log_end_offset)      # caught up now
    append(leader)                                              # and behind from here on
    clock.advance(LAG_S - MS)
    assert leader.isr_change_wanted() is None
    clock.advance(2 * MS)
    assert leader.isr_change_wanted() == [1]


def test_a_follower_that_fetches_without_ever_catching_up_leaves_after_the_lag(leader, clock):
    """Kafka's slow follower: it fetches all the time, but never up to where the leader ended."""
    for _ in range(int(LAG_S / 0.5) - 1):
        append(leader, 2)
        leader.record_follower_fetch(2, 0)
        clock.advance(0.5)
        assert leader.isr_change_wanted() is None                # caught up at the election, within the lag
    clock.advance(0.5 + MS)
    leader.record_follower_fetch(2, 0)
    assert leader.isr_change_wanted() == [1]


def test_a_follower_that_catches_up_within_the_lag_stays_for_ever(leader, clock):
    for _ in range(40):                                         # 100 s: many times the lag
        append(leader)
        clock.advance(LAG_S - 0.5)
        assert leader.isr_change_wanted() is None
        leader.record_follower_fetch(2, leader.log_end_offset)
        append(leader)                                          # behind again until its next fetch
    clock.advance(LAG_S - MS)
    assert leader.isr_change_wanted() is None
    assert leader.isr == [1, 2]


def test_a_follower_at_the_leaders_log_end_stays_whatever_the_time(leader, clock):
    append(leader, 3)
    leader.record_follower_fetch(2, leader.log_end_offset)
    clock.advance(86400.0)                                      # no append, no fetch for a day
    assert leader.isr_change_wanted() is None
    append(leader)
    assert leader.isr_change_wanted() == [1]                    # lacking a batch, its last catch-up is a day old


def test_a_new_leader_counts_the_lag_from_its_election(tmp_path, clock):
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(replica_lag_time_max_ms=LAG_MS), time=clock)
    try:
        p.make_follower(2, 0, [1, 2, 3], [1, 2, 3], 0)
        clock.advance(100.0)
        p.make_leader(1, [1, 2, 3], [1, 2], 1)                  # follower 3 is not in the ISR
        append(p)                                               # neither follower has it
        clock.advance(LAG_S - MS)
        assert p.isr_change_wanted() is None                    # follower 2: caught up at the election
        clock.advance(2 * MS)
        assert p.isr_change_wanted() == [1]
    finally:
        p.close()


def test_an_out_of_sync_follower_rejoins_only_with_a_fetch_within_the_lag(tmp_path, clock):
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(replica_lag_time_max_ms=LAG_MS), time=clock)
    p.make_leader(0, [1, 2], [1], 0)
    try:
        append(p)
        p.record_follower_fetch(2, p.log_end_offset)            # reached the high watermark
        clock.advance(LAG_S - MS)
        assert p.isr_change_wanted() == [1, 2]
        clock.advance(2 * MS)
        assert p.isr_change_wanted() is None                    # that fetch is older than the lag now
        p.record_follower_fetch(2, p.log_end_offset)
        assert p.isr_change_wanted() == [1, 2]
    finally:
        p.close()


def test_a_follower_the_controller_took_out_rejoins_only_by_fetching_again(leader, clock):
    """A follower dies caught up; the controller drops it from the ISR (a newer partition epoch, same leader
    epoch). Its last fetch was recent but came before that: the leader must not ask to add it back, or a
    dead replica is in the ISR the leader counts for acks=all and min.insync.replicas."""
    append(leader)
    leader.record_follower_fetch(2, leader.log_end_offset)       # caught up, then killed
    clock.advance(MS)
    leader.update_isr([1], 1)
    assert leader.isr_change_wanted() is None
    clock.advance(MS)
    leader.record_follower_fetch(2, leader.log_end_offset)       # back, and fetching
    assert leader.isr_change_wanted() == [1, 2]


@pytest.fixture
def manager(tmp_path):
    """A ReplicaManager on a WatchedClock leading t-0 (replicas 1, 2; ISR both); ISR changes it asks for
    are recorded, not applied."""
    clock, asked = WatchedClock(), []
    rm = ReplicaManager(1, str(tmp_path), LogConfig(replica_lag_time_max_ms=LAG_MS), MetadataCache(),
                        alter_partition=lambda p, isr: asked.append((clock.monotonic(), isr)), time=clock)
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic="t", partition=0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2],
                             zk_version=0)
    assert rm.become_leader_or_follower(req).error == E.NONE
    yield rm, clock, asked
    rm.shutdown()


def test_the_maintenance_loop_asks_for_the_shrink_once_the_lag_has_passed(manager):
    rm, clock, asked = manager
    start = clock.monotonic()
    append(rm.get_partition("t", 0))                            # follower 2 has nothing: last caught up at start
    clock.step("isr-maintenance", LAG_S - ISR_CHECK_S / 2)
    assert asked == []
    clock.step("isr-maintenance", ISR_CHECK_S)
    assert asked and asked[0][1] == [1]
    assert LAG_S < asked[0][0] - start <= LAG_S + ISR_CHECK_S


def test_the_high_watermark_is_checkpointed_once_per_interval(manager, tmp_path):
    rm, clock, _ = manager
    p = rm.get_partition("t", 0)
    append(p)
    assert rm.fetch(broker_pb2.FetchRequest(replica_id=2, partitions=[
        broker_pb2.FetchPartition(topic="t", partition=0, fetch_offset=1)])).partitions[0].error == E.NONE
    assert p.high_watermark == 1
    clock.step("isr-maintenance", HW_CHECKPOINT_INTERVAL_S - ISR_CHECK_S / 2)
    assert read_hw_checkpoint(p.hw_checkpoint_path) == 0        # the interval has not passed
    clock.step("isr-maintenance", ISR_CHECK_S)
    until(lambda: read_hw_checkpoint(p.hw_checkpoint_path) == 1, "the high watermark checkpoint")
