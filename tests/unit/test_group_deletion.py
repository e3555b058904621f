"""DeleteGroups and OffsetDelete at the group coordinator (services.broker.group_deletion): Kafka's rules on
which groups and offsets may go, the tombstones written to __consumer_offsets, and a coordinator that loads
the partition afterwards finding them gone.

One broker in process: a real ReplicaManager leading __consumer_offsets-0; `rm.coordinator()` is a fresh
GroupCoordinator that reads the partition's log (the broker that takes the partition over)."""
import base64

import pytest

from eoslab.common.consumer_protocol import encode_subscription
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker import group_deletion, group_listing
from services.broker.consumer_group_manager import Heartbeat
from services.broker.offsets_partition_state import OffsetsPartitionState
from tests.unit.test_consumer_group_persistence import rm  # noqa: F401 - the fixture

pytestmark = pytest.mark.fast


def commit(gc, group, *tps, offset=5):
    r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id=group, generation_id=-1, member_id="", partitions=[
        broker_pb2.OffsetCommitPartition(topic=t, partition=p, offset=offset, metadata="") for t, p in tps]))
    assert r.error == E.NONE
    return r


def committed(gc, group) -> dict:
    r = gc.offset_fetch(broker_pb2.OffsetFetchRequest(group_id=group))
    return {(p.topic, p.partition): p.offset for p in r.partitions if p.offset >= 0}


def classic_members(gc, group, protocol_type="consumer", topics=("orders",)):
    """A Stable classic group with one member, installed as a coordinator loads a stored group."""
    meta = base64.b64encode(encode_subscription(list(topics))).decode()
    gc.membership.load(group, {"generation": 1, "leader": "m1", "protocol_type": protocol_type, "protocol": "range",
                               "state": "Stable", "members": [{"id": "m1", "topics": list(topics),
                                                               "protocols": [["range", meta]]}]})


def listed(gc) -> set:
    return {g for g, *_ in group_listing.list_groups(gc)}


def test_an_empty_group_is_deleted_with_its_offsets_and_stays_deleted_for_the_next_coordinator(rm):
    gc = rm.coordinator()
    commit(gc, "g", ("orders", 0), ("orders", 1))
    commit(gc, "keep", ("orders", 0))
    assert "g" in listed(gc)
    assert group_deletion.delete_groups(gc, ["g"]) == [("g", E.NONE)]
    assert committed(gc, "g") == {} and "g" not in listed(gc)
    assert group_listing.describe_group(gc, "g")[1]["group_state"] == "Dead"
    assert group_deletion.delete_groups(gc, ["g"]) == [("g", E.GROUP_ID_NOT_FOUND)]
    later = rm.coordinator()                           # replays the tombstones from the log
    assert committed(later, "g") == {} and "g" not in listed(later)
    assert committed(later, "keep") == {("orders", 0): 5}


def test_an_unknown_group_is_not_found_and_a_group_with_members_is_not_empty(rm):
    gc = rm.coordinator()
    commit(gc, "busy", ("orders", 0))
    classic_members(gc, "busy")
    assert group_deletion.delete_groups(gc, ["nobody", "busy"]) == [("nobody", E.GROUP_ID_NOT_FOUND),
                                                                     ("busy", E.NON_EMPTY_GROUP)]
    assert committed(gc, "busy") == {("orders", 0): 5} and gc.membership.groups["busy"].members


def test_a_consumer_group_is_deleted_only_once_its_members_left(rm):
    gc = rm.coordinator()
    r = gc.consumer_groups.heartbeat(Heartbeat("g", member_id="a", member_epoch=0, rebalance_timeout_ms=30000,
                                               subscribed_topic_names=["orders"], owned={}, api_version=1))
    assert r["error_code"] == E.NONE
    assert group_deletion.delete_groups(gc, ["g"]) == [("g", E.NON_EMPTY_GROUP)]
    assert gc.consumer_groups.heartbeat(Heartbeat("g", member_id="a", member_epoch=-1))["error_code"] == E.NONE
    assert group_deletion.delete_groups(gc, ["g"]) == [("g", E.NONE)]
    assert gc.consumer_groups.group("g") is None and "g" not in listed(gc)
    assert rm.coordinator().consumer_groups.group("g") is None


def test_a_deletion_that_cannot_be_written_forgets_nothing(rm):
    gc = rm.coordinator()
    commit(gc, "g", ("orders", 0))
    gc._append = lambda *args, **kw: E.NOT_ENOUGH_REPLICAS
    assert group_deletion.delete_groups(gc, ["g"]) == [("g", E.COORDINATOR_NOT_AVAILABLE)]
    assert committed(gc, "g") == {("orders", 0): 5} and "g" in listed(gc)
    assert group_deletion.delete_offsets(gc, "g", [("orders", [0])])[0] == E.COORDINATOR_NOT_AVAILABLE
    assert committed(rm.coordinator(), "g") == {("orders", 0): 5}


def test_offset_delete_removes_only_the_partitions_named(rm):
    gc = rm.coordinator()
    commit(gc, "g", ("orders", 0), ("orders", 1), ("other", 0))
    err, answer = group_deletion.delete_offsets(gc, "g", [("orders", [0, 3])])
    assert (err, answer) == (E.NONE, [("orders", [(0, E.NONE), (3, E.NONE)])])   # 3 had none: still no error
    assert committed(gc, "g") == {("orders", 1): 5, ("other", 0): 5}
    assert committed(rm.coordinator(), "g") == {("orders", 1): 5, ("other", 0): 5}
    assert group_deletion.delete_offsets(gc, "nobody", [("orders", [0])]) == (E.GROUP_ID_NOT_FOUND, [])


def test_offset_delete_refuses_the_topics_a_group_with_members_subscribes_to(rm):
    gc = rm.coordinator()
    commit(gc, "g", ("orders", 0), ("other", 0))
    classic_members(gc, "g", topics=("orders",))
    err, answer = group_deletion.delete_offsets(gc, "g", [("orders", [0]), ("other", [0])])
    assert err == E.NONE and answer == [("orders", [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)]), ("other", [(0, E.NONE)])]
    assert committed(gc, "g") == {("orders", 0): 5}
    classic_members(gc, "connect", protocol_type="connect")
    assert group_deletion.delete_offsets(gc, "connect", [("other", [0])]) == (E.NON_EMPTY_GROUP, [])


def test_an_offsets_tombstone_also_drops_the_pending_transactional_commit():
    st = OffsetsPartitionState(0)
    st.offsets["g"] = {("t", 0): (5, "", -1)}
    st.pending[7] = {"g": {("t", 0): (9, "", -1), ("t", 1): (3, "", -1)}}
    assert st.offset_keys("g") == {("t", 0), ("t", 1)} and st.knows("g")
    st.remove_offset("g", ("t", 0))
    st.complete(7, committed=True)
    assert st.offsets == {"g": {("t", 1): (3, "", -1)}}

