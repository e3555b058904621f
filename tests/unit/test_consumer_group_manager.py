"""ConsumerGroupHeartbeat's coordinator side (services.broker.consumer_group_manager) on a mock clock:
join, heartbeat and leave with Kafka's epochs and errors; two members split a topic and hand partitions
over without both holding one; a silent member is fenced at its session timeout and its partitions go
to the others; offsets are checked by member epoch (the zombie's transactional commit refused)."""
import uuid

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.consumer_group_manager import ConsumerGroupManager, Heartbeat
from services.broker.consumer_group_member import (
    FENCED_MEMBER_EPOCH, INVALID_REGULAR_EXPRESSION, STALE_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION, GroupError)

pytestmark = pytest.mark.fast
TID = uuid.UUID(int=42)
TOPICS = {"orders": (TID, 4)}


def manager(clock=None, classic=None):
    return ConsumerGroupManager(lambda: dict(TOPICS), time=clock or MockTime(), session_timeout_ms=10000,
                                heartbeat_interval_ms=1000, classic_members=lambda g: (classic or {}).get(g))


def join(m, member_id="", version=0, **kw):
    return m.heartbeat(Heartbeat("g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30000,
                                 subscribed_topic_names=["orders"], owned={}, api_version=version, **kw))


def beat(m, r, owned=None, **kw):
    return m.heartbeat(Heartbeat("g", member_id=r["member_id"], member_epoch=r["member_epoch"],
                                 owned=None if owned is None else {TID: owned}, **kw))


def parts(r):
    return sorted(r["assignment"][TID]) if r["assignment"] and TID in r["assignment"] else []


def test_a_v0_join_gets_a_coordinator_member_id_epoch_1_and_every_partition():
    m = manager()
    r = join(m)
    assert r["error_code"] == E.NONE and len(r["member_id"]) == 22
    assert (r["member_epoch"], r["heartbeat_interval_ms"], parts(r)) == (1, 1000, [0, 1, 2, 3])


def test_from_v1_the_client_brings_its_member_id():
    m = manager()
    assert join(m, version=1)["error_code"] == E.INVALID_REQUEST
    assert join(m, member_id="mine", version=1)["member_id"] == "mine"


@pytest.mark.parametrize("hb,code", [
    (Heartbeat("", member_epoch=0), E.INVALID_REQUEST),
    (Heartbeat("g", member_epoch=0, rebalance_timeout_ms=1, owned={}), E.INVALID_REQUEST),     # no subscription
    (Heartbeat("g", member_epoch=0, subscribed_topic_names=["t"], owned={}), E.INVALID_REQUEST),  # no timeout
    (Heartbeat("g", member_epoch=-3, member_id="x"), E.INVALID_REQUEST),
    (Heartbeat("g", member_epoch=3), E.INVALID_REQUEST),                                       # no member id
    (Heartbeat("g", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned={},
               server_assignor="sticky"), UNSUPPORTED_ASSIGNOR),
    (Heartbeat("g", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_regex="(", owned={}),
     INVALID_REGULAR_EXPRESSION),
    (Heartbeat("g", member_id="x", member_epoch=1), E.GROUP_ID_NOT_FOUND),
])
def test_bad_heartbeats_get_kafka_s_error_and_change_nothing(hb, code):
    m = manager()
    assert m.heartbeat(hb)["error_code"] == code
    assert m.group("g") is None or not m.group("g").members


def test_unknown_member_and_wrong_epochs_are_refused():
    m = manager()
    r = join(m)
    assert beat(m, dict(r, member_id="nobody"))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert beat(m, dict(r, member_epoch=5))["error_code"] == FENCED_MEMBER_EPOCH
    assert beat(m, r)["error_code"] == E.NONE


def test_two_members_split_the_topic_and_no_partition_is_ever_held_by_both():
    m = manager()
    a = join(m)
    b = join(m)
    assert parts(b) == []                                   # a still holds everything
    a2 = beat(m, a, owned=[0, 1, 2, 3])
    keep = parts(a2)
    assert len(keep) == 2 and a2["member_epoch"] == 1       # revoke two first, same epoch
    b2 = beat(m, b, owned=[])
    assert parts(b2) == [] if b2["assignment"] else True    # not free yet
    a3 = beat(m, a2, owned=keep)                            # revoked: a moves to the new epoch
    assert a3["member_epoch"] == m.group("g").group_epoch
    b3 = beat(m, b, owned=[])
    assert sorted(parts(b3) + keep) == [0, 1, 2, 3] and not set(parts(b3)) & set(keep)
    assert str(m.group("g").state) == "Stable"


def test_a_silent_member_is_fenced_at_its_session_timeout_and_the_other_gets_all():
    clock = MockTime()
    m = manager(clock)
    a, b = join(m), join(m)
    a = beat(m, a, owned=[0, 1, 2, 3])
    a = beat(m, a, owned=parts(a))
    b = beat(m, b, owned=[])
    clock.sleep(9.0)
    a = beat(m, a, owned=parts(a))                           # a heartbeats, b goes silent
    assert m.expire() == []
    clock.sleep(1.5)
    assert m.expire() == [("g", b["member_id"])]
    a = beat(m, a, owned=parts(a))
    assert parts(a) == [0, 1, 2, 3]
    assert beat(m, b, owned=parts(b))["error_code"] == E.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    clock = MockTime()
    m = manager(clock)
    a = m.heartbeat(Heartbeat("g", member_epoch=0, rebalance_timeout_ms=2000, subscribed_topic_names=["orders"],
                              owned={}))
    join(m)
    a = beat(m, a, owned=[0, 1, 2, 3])                       # asked to revoke two
    clock.sleep(1.0)
    a = beat(m, a, owned=[0, 1, 2, 3])                       # heartbeats, but does not give them up
    clock.sleep(1.5)
    assert m.expire() == [("g", a["member_id"])]


def test_leave_frees_the_partitions_and_bumps_the_group_epoch():
    m = manager()
    a = join(m)
    epoch = m.group("g").group_epoch
    r = m.heartbeat(Heartbeat("g", member_id=a["member_id"], member_epoch=-1))
    assert (r["error_code"], r["member_epoch"]) == (E.NONE, -1)
    assert m.group("g").group_epoch == epoch + 1 and not m.group("g").partition_epochs


def test_a_static_member_leaving_with_minus_2_comes_back_to_its_partitions():
    m = manager()
    a = join(m, instance_id="pod-a")
    assert join(m, instance_id="pod-a")["error_code"] == UNRELEASED_INSTANCE_ID
    gone = m.heartbeat(Heartbeat("g", member_id=a["member_id"], member_epoch=-2, instance_id="pod-a"))
    assert gone["member_epoch"] == -2
    back = join(m, instance_id="pod-a")
    assert back["error_code"] == E.NONE and back["member_id"] != a["member_id"] and parts(back) == [0, 1, 2, 3]
    assert beat(m, a, instance_id="pod-a")["error_code"] == E.FENCED_INSTANCE_ID


def test_a_classic_group_with_members_keeps_its_id():
    assert join(manager(classic={"g": 2}))["error_code"] == E.GROUP_ID_NOT_FOUND
    assert join(manager(classic={"g": 0}))["error_code"] == E.NONE


def test_offset_commits_are_checked_by_member_epoch():
    m = manager()
    a = join(m)
    g, mid = m.group("g"), a["member_id"]
    g.validate_offset_commit(mid, 1, False, 9)
    for epoch, code in ((0, STALE_MEMBER_EPOCH), (2, FENCED_MEMBER_EPOCH)):
        with pytest.raises(GroupError) as e:
            g.validate_offset_commit(mid, epoch, True, 3)
        assert e.value.code == code
    with pytest.raises(GroupError) as e:
        g.validate_offset_commit(mid, 1, False, 8)
    assert e.value.code == UNSUPPORTED_VERSION
    with pytest.raises(GroupError) as e:
        g.validate_offset_commit("zombie", 1, True, 3)
    assert e.value.code == E.UNKNOWN_MEMBER_ID
    m.heartbeat(Heartbeat("g", member_id=mid, member_epoch=-1))
    g.validate_offset_commit("", -1, False, 9)              # an empty group takes a standalone commit


def test_list_groups_shows_a_consumer_protocol_group_with_its_state():
    from types import SimpleNamespace
    from services.broker import group_listing
    from services.broker.membership import GroupMembership
    m = manager()
    join(m)
    gc = SimpleNamespace(led_partition_states=lambda: {0: SimpleNamespace(offsets={}, groups={})},
                         membership=GroupMembership(time=MockTime()), consumer_groups=m, partition_for=lambda g: 0)
    assert group_listing.list_groups(gc) == [("g", "consumer", "Stable", "consumer")]
    assert group_listing.list_groups(gc, types_filter=["Classic"]) == []
    assert group_listing.list_groups(gc, types_filter=["CONSUMER"]) == [("g", "consumer", "Stable", "consumer")]
    assert group_listing.list_groups(gc, ["Empty"]) == []


def test_a_broken_guarantee_is_answered_unknown_server_error_not_raised():
    m = manager()
    a = join(m)
    g = m.group("g")
    g.partition_epochs[(TID, 0)] = ("someone-else", 9)      # as if another member held a partition a holds
    r = beat(m, a, owned=[0, 1, 2, 3], subscribed_topic_names=["orders", "other"])
    assert r["error_code"] == E.UNKNOWN_SERVER_ERROR


def test_a_groups_own_configs_set_its_session_timeout_and_heartbeat_interval():
    """KIP-848 group configs (GroupConfigs.of): the coordinator fences on the group's own
    consumer.session.timeout.ms and tells the member the group's consumer.heartbeat.interval.ms."""
    clock = MockTime()
    m = manager(clock)
    own = {}
    m.group_config = lambda group_id: own if group_id == "g" else {}
    a = join(m)
    assert a["heartbeat_interval_ms"] == 1000                 # the broker's defaults
    own.update({"consumer.session.timeout.ms": 3000, "consumer.heartbeat.interval.ms": 700})
    a = beat(m, a, owned=parts(a))
    assert a["heartbeat_interval_ms"] == 700
    clock.sleep(2.5)
    assert m.expire() == []
    clock.sleep(1.0)                                           # 3.5 s > the group's 3 s (the broker's: 10 s)
    assert m.expire() == [("g", a["member_id"])]
