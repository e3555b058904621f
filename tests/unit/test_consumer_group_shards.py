"""ConsumerGroupManager's shards (services.broker.consumer_group_manager): a group whose record waits to be
stored (acks=all with a follower cut off) holds up only the groups of its own __consumer_offsets
partition, as Kafka's coordinator runtime serialises per shard; another shard's heartbeats, and the
expiry of its members, go on meanwhile."""
import threading
import uuid

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.consumer_group_manager import ConsumerGroupManager, Heartbeat
from services.common.internal_topics import DEFAULT_OFFSETS_PARTITIONS, partition_for

pytestmark = pytest.mark.fast
TID = uuid.UUID(int=7)
WAIT_S = 10.0


def groups_by_shard() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for i in range(200):
        out.setdefault(partition_for(f"g{i}", DEFAULT_OFFSETS_PARTITIONS), []).append(f"g{i}")
    return out


SHARDS = groups_by_shard()
SLOW, SAME_SHARD = SHARDS[0][0], SHARDS[0][1]      # both in offsets partition 0
OTHER = SHARDS[1][0]                               # offsets partition 1


class BlockingStore:
    """A store that holds the writes of one group until released (its leader waits for a follower)."""

    def __init__(self, slow_group: str):
        self.slow_group = slow_group
        self.entered, self.release = threading.Event(), threading.Event()
        self.stored: list[str] = []

    def __call__(self, group, stored):
        if group == self.slow_group and not self.release.is_set():
            self.entered.set()
            assert self.release.wait(3 * WAIT_S)     # longer than any wait of the tests
        self.stored.append(group)
        return E.NONE


def manager(store, clock=None):
    return ConsumerGroupManager(lambda: {"orders": (TID, 2)}, time=clock or MockTime(), session_timeout_ms=10000,
                                heartbeat_interval_ms=1000, store=store)


def join(m, group, member_id="m"):
    return m.heartbeat(Heartbeat(group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30000,
                                 subscribed_topic_names=["orders"], owned={}, api_version=1))


def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()), daemon=True)
    t.start()
    return t, out


def slow_join_waiting(clock=None):
    """A manager whose SLOW group's join waits in its store: (store, manager, thread, its result)."""
    store = BlockingStore(SLOW)
    m = manager(store, clock)
    slow, slow_out = in_thread(lambda: join(m, SLOW))
    assert store.entered.wait(WAIT_S)
    return store, m, slow, slow_out


def test_a_store_that_waits_does_not_hold_up_another_shards_heartbeat():
    store, m, slow, slow_out = slow_join_waiting()
    try:
        other, other_out = in_thread(lambda: join(m, OTHER))
        other.join(WAIT_S)
        assert not other.is_alive(), "a group of another offsets partition waited for the slow store"
        assert other_out["r"]["error_code"] == E.NONE and other_out["r"]["member_epoch"] == 1
        assert slow.is_alive() and "r" not in slow_out
    finally:
        store.release.set()
    slow.join(WAIT_S)
    assert slow_out["r"]["error_code"] == E.NONE
    assert store.stored == [OTHER, SLOW]


def test_while_a_store_waits_only_its_shard_is_held_not_the_tables():
    store, m, slow, _ = slow_join_waiting()
    try:
        same, other = m.shard_lock(SAME_SHARD), m.shard_lock(OTHER)
        assert same is m.shard_lock(SLOW) and other is not same
        assert not same.acquire(blocking=False)      # the slow group's shard: its other groups wait
        for free in (other, m.lock):                 # the tables and the other shards do not
            assert free.acquire(blocking=False)
            free.release()
    finally:
        store.release.set()
    slow.join(WAIT_S)
    assert store.stored == [SLOW]


def test_expiry_fences_another_shards_silent_member_while_a_store_waits():
    clock = MockTime()
    store = BlockingStore(SLOW)
    m = manager(store, clock)
    assert join(m, OTHER)["error_code"] == E.NONE        # stored at once: not the slow group
    clock.sleep(11)                                      # OTHER's member has been silent past its session
    slow, _ = in_thread(lambda: join(m, SLOW))
    assert store.entered.wait(WAIT_S)
    try:
        exp, exp_out = in_thread(m.expire)
        exp.join(WAIT_S)
        assert not exp.is_alive(), "expire() waited for another shard's store"
        assert exp_out["r"] == [(OTHER, "m")]
        assert m.group(OTHER).members == {}
    finally:
        store.release.set()
    slow.join(WAIT_S)


def test_a_failed_store_after_the_tables_lock_is_released_still_undoes_the_change():
    m = manager(lambda group, stored: E.NOT_LEADER_OR_FOLLOWER)
    r = join(m, OTHER)
    assert r["error_code"] == E.NOT_LEADER_OR_FOLLOWER
    assert m.group(OTHER) is None and m.sessions == {} and m.rebalances == {}
