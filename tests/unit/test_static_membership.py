"""KIP-345 static membership on GroupMembership in one process, as Kafka's GroupCoordinator runs it: a
static member that comes back under a new member id takes its old place without a rebalance while
the group is Stable (and gets its assignment back), its old id is fenced (FENCED_INSTANCE_ID) on every
request, and leaving by instance id works whatever member id holds it."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker import membership as ms
from services.broker.classic_group import STABLE

pytestmark = pytest.mark.fast
T = ms.GROUP_MIN_SESSION_TIMEOUT_MS


def join(m, instance="", member_id="", protocols=(("range", b"sub"),)):
    return m.join(broker_pb2.JoinGroupRequest(
        group_id="g", session_timeout_ms=T, rebalance_timeout_ms=T, member_id=member_id, protocol_type="consumer",
        group_instance_id=instance, protocols=[broker_pb2.GroupProtocol(name=n, metadata=d) for n, d in protocols]),
        "app")


def sync(m, r, assignment=None, instance=""):
    return m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id,
                                              group_instance_id=instance,
                                              assignment_bytes=assignment or {}))


@pytest.fixture
def stable():
    """A Stable group of one static member, "pod-0", whose assignment is b"mine"."""
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    first = join(m, "pod-0")
    assert first.error == E.NONE and first.member_id.startswith("pod-0-")
    assert sync(m, first, {first.member_id: b"mine"}, "pod-0").assignment_bytes == b"mine"
    return m, first


def test_a_restarted_static_member_takes_its_place_without_a_rebalance(stable):
    m, first = stable
    back = join(m, "pod-0")                                   # a new process: no member id yet
    g = m.groups["g"]
    assert back.error == E.NONE and back.member_id != first.member_id
    assert back.generation_id == first.generation_id and g.state == STABLE    # no rebalance
    assert back.leader == first.member_id and not back.members   # the old leader id: it does not assign again
    assert sync(m, back, instance="pod-0").assignment_bytes == b"mine"
    assert list(g.members) == [back.member_id] and g.leader == back.member_id


def test_the_old_member_id_of_a_replaced_static_member_is_fenced(stable):
    m, first = stable
    join(m, "pod-0")
    old = first.member_id
    hb = m.heartbeat(broker_pb2.HeartbeatRequest(group_id="g", generation_id=first.generation_id, member_id=old,
                                                 group_instance_id="pod-0"))
    assert hb.error == E.FENCED_INSTANCE_ID
    assert sync(m, first, instance="pod-0").error == E.FENCED_INSTANCE_ID
    assert join(m, "pod-0", member_id=old).error == E.FENCED_INSTANCE_ID
    assert m.check_commit("g", first.generation_id, old, instance="pod-0") == E.FENCED_INSTANCE_ID
    assert m.leave(broker_pb2.LeaveGroupRequest(group_id="g", member_id=old,
                                                group_instance_id="pod-0")).error == E.FENCED_INSTANCE_ID


def test_leaving_by_instance_id_removes_whoever_holds_it(stable):
    m, _ = stable
    back = join(m, "pod-0")
    assert m.leave(broker_pb2.LeaveGroupRequest(group_id="g", group_instance_id="pod-0")).error == E.NONE
    assert back.member_id not in m.groups["g"].members
    assert m.leave(broker_pb2.LeaveGroupRequest(group_id="g", group_instance_id="pod-0")).error == \
        E.UNKNOWN_MEMBER_ID


def test_a_static_member_back_with_a_change_of_protocol_rebalances():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    first = join(m, "pod-0", protocols=(("range", b""), ("roundrobin", b"")))
    sync(m, first, {first.member_id: b"mine"}, "pod-0")
    back = join(m, "pod-0", protocols=(("roundrobin", b""), ("range", b"")))   # now prefers roundrobin
    assert back.error == E.NONE and back.generation_id == first.generation_id + 1
    assert back.protocol_name == "roundrobin" and back.leader == back.member_id


def test_the_instance_id_is_stored_and_loaded_with_the_group(stable):
    m, first = stable
    other = ms.GroupMembership()
    other.load("g", m.snapshot("g"))
    back = join(other, "pod-0")
    assert back.error == E.NONE and back.generation_id == first.generation_id       # still known: no rebalance
