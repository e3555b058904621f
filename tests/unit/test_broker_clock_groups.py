"""Consumer-group timeouts on a mock clock (Kafka's GroupCoordinator: session timeout, rebalance
timeout, group.initial.rebalance.delay.ms; the lab's JoinGroup and SyncGroup wait bounds).

Guarantees checked: the first rebalance of a group waits the initial delay for more members and no
longer; a member that sends no heartbeat within session.timeout.ms is removed and the group
rebalances without it, while one that heartbeats within it stays; a rebalance ends at its
rebalance timeout without the members that did not rejoin; a member waiting for its assignment
needs no heartbeat meanwhile; a JoinGroup waits at most its rebalance timeout and a second, a
follower's SyncGroup at most its rebalance timeout for the leader's assignment; the group
coordinator's expiry loop removes a silent member on the broker's clock.
No test sleeps: joins and syncs wait in threads on a WatchedClock, and the test moves it.
"""
from types import SimpleNamespace

import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, common_pb2
from services.broker import membership as ms
from services.broker.group_coordinator import EXPIRY_CHECK_S, GroupCoordinator
from services.broker.metadata_cache import MetadataCache
from tests.unit.test_broker_clock_support import REAL_TIMEOUT_S, WatchedClock, start

pytestmark = pytest.mark.fast
SESSION_S = 10.0
REBALANCE_S = 5.0
DELAY_S = 3.0
MS = 0.001


def join(m, member_id="", rebalance_s=REBALANCE_S, session_s=SESSION_S):
    return m.join(broker_pb2.JoinGroupRequest(group_id="g", member_id=member_id, topics=["t"],
                                              session_timeout_ms=int(session_s * 1000),
                                              rebalance_timeout_ms=int(rebalance_s * 1000)))


def heartbeat(m, member_id, generation):
    return m.heartbeat(broker_pb2.HeartbeatRequest(group_id="g", member_id=member_id, generation_id=generation)).error


def sync(m, member_id, generation, assignments=None):
    return m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=member_id, generation_id=generation,
                                              assignments=assignments or {}))


def result(thread_and_out):
    t, out = thread_and_out
    t.join(REAL_TIMEOUT_S)
    assert not t.is_alive(), "the call did not return"
    assert "error" not in out, out.get("error")
    return out["result"]


def still_waiting(*threads):
    for t, _ in threads:
        t.join(0.1)
        assert t.is_alive()


def joined(clock, m, names, **kw):
    """Every name joins the (new) group in its own thread; the joins return at the initial delay."""
    calls = {n: start(f"join-{n}", lambda: join(m, **kw)) for n in names}
    for n in names:
        clock.await_waiting(f"join-{n}")
    clock.advance(DELAY_S)
    return {n: result(c) for n, c in calls.items()}


def stable(clock, m, names, **kw):
    """A Stable group of `names` in generation 1: joined, then synced (the leader first)."""
    js = joined(clock, m, names, **kw)
    leader = next(iter(js.values())).leader
    for r in sorted(js.values(), key=lambda r: r.member_id != leader):
        assert sync(m, r.member_id, r.generation_id, {r.member_id: broker_pb2.PartitionList()}
                    if r.member_id == leader else None).error == E.NONE
    assert m.groups["g"].state == ms.STABLE
    return {n: r.member_id for n, r in js.items()}


@pytest.fixture
def clock():
    return WatchedClock()


@pytest.fixture
def m(clock):
    return ms.GroupMembership(initial_rebalance_delay_s=DELAY_S, time=clock)


def test_the_first_rebalance_waits_the_initial_delay_for_more_members(clock, m):
    a = start("join-a", lambda: join(m))
    clock.await_waiting("join-a")
    clock.advance(1.0)
    b = start("join-b", lambda: join(m))
    clock.await_waiting("join-b")
    clock.advance(DELAY_S - 1.0 - MS)
    still_waiting(a, b)
    clock.advance(2 * MS)
    ra, rb_ = result(a), result(b)
    assert ra.error == rb_.error == E.NONE
    assert ra.generation_id == rb_.generation_id == 1 and ra.leader == rb_.leader
    assert len(ra.members if ra.leader == ra.member_id else rb_.members) == 2


def test_a_member_without_heartbeats_for_the_session_timeout_is_removed_and_the_group_rebalances(clock, m):
    ids = stable(clock, m, ["a", "b"])
    for _ in range(2):                                   # b heartbeats every 4 s, a never
        clock.advance(4.0)
        assert heartbeat(m, ids["b"], 1) == E.NONE
    clock.advance(SESSION_S - 8.0 - MS)
    m.expire()
    assert set(m.groups["g"].members) == {ids["a"], ids["b"]}
    clock.advance(2 * MS)
    m.expire()
    assert set(m.groups["g"].members) == {ids["b"]}
    assert m.groups["g"].state == ms.PREPARING
    assert heartbeat(m, ids["b"], 1) == E.REBALANCE_IN_PROGRESS
    assert heartbeat(m, ids["a"], 1) == E.UNKNOWN_MEMBER_ID
    r = join(m, member_id=ids["b"])                      # every member left has rejoined: no wait
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, ids["b"])
    assert sync(m, ids["b"], 2, {ids["b"]: broker_pb2.PartitionList()}).error == E.NONE
    for _ in range(10):                                  # 100 s of heartbeats within the session timeout
        clock.advance(SESSION_S - MS)
        m.expire()
        assert heartbeat(m, ids["b"], 2) == E.NONE
    assert list(m.groups["g"].members) == [ids["b"]] and m.groups["g"].generation == 2


def test_a_rebalance_ends_at_its_rebalance_timeout_without_the_members_that_did_not_rejoin(clock, m):
    ids = stable(clock, m, ["a", "b"], session_s=60.0)
    c = start("join-c", lambda: join(m))                 # a new member: a rebalance of REBALANCE_S
    clock.await_waiting("join-c")
    a = start("join-a2", lambda: join(m, member_id=ids["a"]))
    clock.await_waiting("join-a2")                       # b does not rejoin
    clock.advance(REBALANCE_S - MS)
    still_waiting(c, a)
    clock.advance(2 * MS)
    rc, ra = result(c), result(a)
    assert rc.error == ra.error == E.NONE and rc.generation_id == ra.generation_id == 2
    assert set(m.groups["g"].members) == {ids["a"], rc.member_id}
    assert heartbeat(m, ids["b"], 2) == E.UNKNOWN_MEMBER_ID


def test_a_join_waits_at_most_its_rebalance_timeout_and_a_second(clock, m):
    ids = stable(clock, m, ["a", "b"], rebalance_s=20.0)
    assert m.leave(broker_pb2.LeaveGroupRequest(group_id="g", member_id=ids["b"])).error == E.NONE
    assert m.groups["g"].state == ms.PREPARING           # for a's rebalance timeout: 20 s
    c = start("join-c", lambda: join(m, rebalance_s=2.0))
    clock.await_waiting("join-c")
    clock.advance(3.0 - MS)
    still_waiting(c)
    clock.advance(2 * MS)
    assert result(c).error == E.REBALANCE_IN_PROGRESS


def test_a_followers_sync_waits_for_the_leaders_assignment(clock, m):
    js = joined(clock, m, ["a", "b"])
    leader = js["a"].leader
    follower = next(r.member_id for r in js.values() if r.member_id != leader)
    f = start("sync-f", lambda: sync(m, follower, 1))
    clock.await_waiting("sync-f")
    clock.advance(REBALANCE_S - MS)
    still_waiting(f)
    plan = {leader: broker_pb2.PartitionList(), follower: broker_pb2.PartitionList(
        partitions=[common_pb2.TopicPartition(topic="t", partition=0)])}
    assert sync(m, leader, 1, plan).error == E.NONE
    r = result(f)
    assert r.error == E.NONE and [(p.topic, p.partition) for p in r.assignment] == [("t", 0)]


def test_a_followers_sync_gives_up_at_its_rebalance_timeout(clock, m):
    js = joined(clock, m, ["a", "b"])
    follower = next(r.member_id for r in js.values() if r.member_id != r.leader)
    f = start("sync-f", lambda: sync(m, follower, 1))
    clock.await_waiting("sync-f")
    clock.advance(REBALANCE_S - MS)
    still_waiting(f)
    clock.advance(2 * MS)
    assert result(f).error == E.REBALANCE_IN_PROGRESS


def test_a_member_waiting_for_its_assignment_needs_no_heartbeat(clock, m):
    """Kafka's hasSatisfiedHeartbeat: a member awaiting sync is not expired; the leader, which awaits
    nothing, must heartbeat."""
    js = joined(clock, m, ["a", "b"], rebalance_s=30.0)
    leader = js["a"].leader
    follower = next(r.member_id for r in js.values() if r.member_id != leader)
    f = start("sync-f", lambda: sync(m, follower, 1))
    clock.await_waiting("sync-f")
    clock.advance(SESSION_S - 2.0)
    assert heartbeat(m, leader, 1) == E.NONE
    clock.advance(2.0 + MS)                              # the follower's last heartbeat: SESSION_S ago
    m.expire()
    assert set(m.groups["g"].members) == {leader, follower}
    assert sync(m, leader, 1, {leader: broker_pb2.PartitionList(), follower: broker_pb2.PartitionList()}).error \
        == E.NONE
    assert result(f).error == E.NONE
    clock.advance(SESSION_S - MS)                        # its sync counted as a heartbeat
    m.expire()
    assert set(m.groups["g"].members) == {leader, follower}


def test_the_coordinators_expiry_loop_removes_a_silent_member_on_the_brokers_clock(clock):
    gc = GroupCoordinator(SimpleNamespace(), MetadataCache(), time=clock)
    try:
        m = gc.membership
        a = start("join-a", lambda: join(m))
        clock.await_waiting("join-a")
        clock.advance(0.3)                               # the coordinator's initial delay
        r = result(a)
        assert sync(m, r.member_id, 1, {r.member_id: broker_pb2.PartitionList()}).error == E.NONE
        clock.step("group-expiry", SESSION_S - EXPIRY_CHECK_S / 2)
        assert list(m.groups["g"].members) == [r.member_id]
        clock.step("group-expiry", EXPIRY_CHECK_S)
        assert not m.groups["g"].members and m.groups["g"].state == ms.EMPTY
    finally:
        gc.shutdown()
