"""Group metadata survives a group coordinator move (Kafka's GroupMetadataManager): real processes."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, common_pb2
from tests import helpers as h

pytestmark = pytest.mark.integration


def coordinator(boot: str, group: str):
    """(node id, stub) of the group's coordinator, asking any live broker."""
    for _ in range(300):
        for addr in boot.split(","):
            try:
                r = h.broker_stub(addr).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                    key_type=broker_pb2.GROUP, key=group), timeout=2)
            except Exception:  # noqa: BLE001 - a broker that is down
                continue
            if r.error == E.NONE:
                return r.node_id, h.broker_stub(f"{r.host}:{r.port}")
        h.time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


def until_not(call, errors, what):
    out = []

    def attempt():
        try:
            r = call()
        except Exception:  # noqa: BLE001 - the metadata may still name the dead broker for a moment
            return False
        out[:] = [r]
        return r.error not in errors
    h.wait_for(attempt, timeout=60, what=what)
    return out[0]


def test_a_new_coordinator_keeps_the_generation(make_cluster):
    rt = make_cluster(brokers=3, controllers=1)
    boot = rt.bootstrap_all()
    h.new_topic(boot, "grp", 2)
    group = "keep-generation"
    moving = (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS)
    node, stub = coordinator(boot, group)
    j = until_not(lambda: coordinator(boot, group)[1].JoinGroup(broker_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=5000, topics=["grp"]), timeout=30),
        moving, "JoinGroup")
    assert j.error == E.NONE and j.leader == j.member_id
    mine = broker_pb2.PartitionList(partitions=[common_pb2.TopicPartition(topic="grp", partition=p) for p in (0, 1)])
    s = coordinator(boot, group)[1].SyncGroup(broker_pb2.SyncGroupRequest(
        group_id=group, generation_id=j.generation_id, member_id=j.member_id, assignments={j.member_id: mine}),
        timeout=30)
    assert s.error == E.NONE
    node, _ = coordinator(boot, group)
    rt.kill(f"broker-{node}")                                # the coordinator dies; another leads the partition

    def heartbeat():
        return coordinator(boot, group)[1].Heartbeat(broker_pb2.HeartbeatRequest(
            group_id=group, generation_id=j.generation_id, member_id=j.member_id), timeout=10)
    hb = until_not(heartbeat, moving, "a heartbeat the new coordinator answers")
    assert coordinator(boot, group)[0] != node
    assert hb.error == E.NONE                                # not UNKNOWN_MEMBER_ID: the member is known
    c = coordinator(boot, group)[1].OffsetCommit(broker_pb2.OffsetCommitRequest(
        group_id=group, generation_id=j.generation_id, member_id=j.member_id,
        partitions=[broker_pb2.OffsetCommitPartition(topic="grp", partition=0, offset=7)]), timeout=30)
    assert c.error == E.NONE
    again = coordinator(boot, group)[1].SyncGroup(broker_pb2.SyncGroupRequest(
        group_id=group, generation_id=j.generation_id, member_id=j.member_id), timeout=30)
    assert [(a.topic, a.partition) for a in again.assignment] == [("grp", 0), ("grp", 1)]
