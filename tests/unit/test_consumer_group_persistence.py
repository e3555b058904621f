"""KIP-848 consumer groups are stored in __consumer_offsets (Kafka's GroupMetadataManager records) and a
coordinator that takes the offsets partition over loads them: members keep their epochs and assignments,
the group its epoch and target assignment, so a member's next heartbeat and its commits at its epoch pass;
a tombstone removes a group; a change that could not be stored is undone and never answered as done.

One broker in process: a real ReplicaManager leading __consumer_offsets-0 and topic "orders"; a second
GroupCoordinator on the same replica manager is the broker that took the partition over (it reads the
partition's log afresh)."""
import base64
import uuid

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.common.topics import topic_id_uuid
from eoslab.v1 import broker_pb2
from services.broker.consumer_group_manager import Heartbeat
from services.broker.consumer_group_member import FENCED_MEMBER_EPOCH
from services.broker.group_coordinator import GroupCoordinator
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
OFFSETS = "__consumer_offsets"
TOPIC_ID = base64.urlsafe_b64encode(uuid.UUID(int=42).bytes).decode().rstrip("=")
TID = topic_id_uuid(TOPIC_ID)


@pytest.fixture
def rm(tmp_path):
    md = MetadataCache()
    md.update(broker_pb2.UpdateMetadataRequest(partition_states=[
        broker_pb2.PartitionState(topic=OFFSETS, partition=0, leader=1, replicas=[1])] + [
        broker_pb2.PartitionState(topic="orders", partition=p, leader=1, replicas=[1]) for p in range(4)],
        topic_ids={"orders": TOPIC_ID}))
    rm = ReplicaManager(1, str(tmp_path), LogConfig(), md, time=MockTime())
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic=OFFSETS, partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1])
    assert rm.become_leader_or_follower(req).error == E.NONE
    rm.md = md
    coordinators = []

    def coordinator() -> GroupCoordinator:
        gc = GroupCoordinator(rm, md, time=MockTime())
        coordinators.append(gc)
        assert gc.owns("g") == E.NONE          # loads the offsets partition
        return gc
    rm.coordinator = coordinator
    yield rm
    for gc in coordinators:
        gc.shutdown()
    rm.shutdown()


def join(gc, member_id):
    return gc.consumer_groups.heartbeat(Heartbeat("g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30000,
                                                  subscribed_topic_names=["orders"], owned={}, api_version=1))


def beat(gc, r, owned):
    return gc.consumer_groups.heartbeat(Heartbeat("g", member_id=r["member_id"], member_epoch=r["member_epoch"],
                                                  owned={TID: owned}, api_version=1))


def stored_form(gc):
    g = gc.consumer_groups.group("g")
    return None if g is None else g.to_record()


def two_members_reconciled(gc):
    a = join(gc, "a")
    assert a["error_code"] == E.NONE and sorted(a["assignment"][TID]) == [0, 1, 2, 3]
    b = join(gc, "b")                                   # epoch 2: a must give two partitions up
    a = beat(gc, a, [0, 1, 2, 3])
    a = beat(gc, a, sorted(a["assignment"][TID]) if a["assignment"] else [0, 1, 2, 3])
    b = beat(gc, b, [])
    for r in (a, b):
        assert r["error_code"] == E.NONE, r
    g = gc.consumer_groups.group("g")
    assert g.group_epoch == 2 and g.assignment_epoch == 2
    return a, b


def test_a_new_coordinator_loads_the_consumer_group_as_stored(rm):
    old = rm.coordinator()
    a, b = two_members_reconciled(old)
    before = stored_form(old)
    new = rm.coordinator()                              # the broker that took __consumer_offsets-0 over
    g = new.consumer_groups.group("g")
    assert g is not None, "the new coordinator did not load the consumer group"
    assert stored_form(new) == before
    assert {m: g.members[m].member_epoch for m in g.members} == {"a": a["member_epoch"], "b": b["member_epoch"]}
    assert g.partition_epochs == old.consumer_groups.group("g").partition_epochs
    assert new._check_member("g", a["member_epoch"], "a", api_version=9) == E.NONE     # commits at its epoch
    assert new._check_member("g", a["member_epoch"] + 1, "a", api_version=9) == FENCED_MEMBER_EPOCH
    held = sorted(g.members["a"].assigned.get(TID, ()))
    r = beat(new, a, held)                              # its next heartbeat at its epoch is accepted
    assert (r["error_code"], r["member_epoch"]) == (E.NONE, a["member_epoch"])
    assert new.consumer_groups.sessions.get(("g", "a")) is not None    # and its session runs again


def test_a_member_leaving_is_stored_and_a_tombstone_removes_the_group(rm):
    old = rm.coordinator()
    a, b = two_members_reconciled(old)
    assert old.consumer_groups.heartbeat(Heartbeat("g", member_id="b", member_epoch=-1))["error_code"] == E.NONE
    g = rm.coordinator().consumer_groups.group("g")
    assert set(g.members) == {"a"} and g.group_epoch == 3
    assert old.consumer_groups.heartbeat(Heartbeat("g", member_id="a", member_epoch=-1))["error_code"] == E.NONE
    assert old.consumer_groups.delete_group("g") == E.NONE
    assert old.consumer_groups.group("g") is None
    assert rm.coordinator().consumer_groups.group("g") is None


def test_a_change_not_stored_is_undone_and_not_answered(rm):
    gc = rm.coordinator()
    a, _ = two_members_reconciled(gc)
    before = stored_form(gc)
    gc._append = lambda *args, **kw: E.NOT_ENOUGH_REPLICAS
    r = join(gc, "c")
    assert r["error_code"] == E.COORDINATOR_NOT_AVAILABLE and r["member_epoch"] == 0
    assert stored_form(gc) == before                     # c never joined, the epoch did not move
    r = gc.consumer_groups.heartbeat(Heartbeat("g", member_id="a", member_epoch=-1))
    assert r["error_code"] == E.COORDINATOR_NOT_AVAILABLE and "a" in gc.consumer_groups.group("g").members
    assert stored_form(rm.coordinator()) == before


def test_a_former_coordinator_forgets_a_group_it_can_no_longer_store(rm):
    gc = rm.coordinator()
    two_members_reconciled(gc)
    gc.states.clear()                                   # the partition is no longer loaded here at its epoch
    gc.time.sleep(gc.consumer_groups.session_timeout_ms / 1000.0 + 1)
    gc.consumer_groups.expire()                         # fencing a silent member is NOT_COORDINATOR
    assert gc.consumer_groups.group("g") is None
    g = rm.coordinator().consumer_groups.group("g")     # the log still has both members
    assert set(g.members) == {"a", "b"}
