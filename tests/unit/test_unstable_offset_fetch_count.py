"""KIP-447 from the broker's side: an OffsetFetch answered without require_stable while a transactional offset
commit of that group-partition is pending is counted per group (with the Kafka client id), and the
GroupMetrics RPC reads the count; a require_stable fetch (answered UNSTABLE_OFFSET_COMMIT) and a fetch with
nothing pending are not counted.

One broker in process: a real ReplicaManager leading __consumer_offsets-0, the GroupCoordinator, the Kafka
listener's group APIs and the broker's gRPC servicer over them. Markers go through the replica manager's
WriteTxnMarkers path, as the transaction coordinator's do.
"""
from types import SimpleNamespace

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.broker_service import BrokerService
from services.broker.group_coordinator import GroupCoordinator
from services.kafka_protocol.codec import RequestHeader
from services.kafka_protocol.group_apis import OFFSET_FETCH, GroupApis
from tests.helpers import offsets_leader

pytestmark = pytest.mark.fast
OFFSETS = "__consumer_offsets"
PID, EPOCH = 7, 0


@pytest.fixture
def broker(tmp_path):
    md, rm = offsets_leader(tmp_path)
    gc = GroupCoordinator(rm, md, txn_offset_commit_member_check=False, time=MockTime())
    server = SimpleNamespace(replica_manager=rm, group_coordinator=gc, broker_id=1, metadata=md)
    svc = BrokerService(server)
    kafka = GroupApis(SimpleNamespace(svc=svc, s=server))
    yield rm, gc, svc, kafka
    gc.shutdown()
    rm.shutdown()


def commit(gc, group: str, offset: int, transactional: bool) -> None:
    parts = [broker_pb2.OffsetCommitPartition(topic="in", partition=0, offset=offset)]
    if transactional:
        r = gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
            transactional_id="tx", group_id=group, producer_id=PID, producer_epoch=EPOCH, generation_id=-1,
            partitions=parts))
    else:
        r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id=group, generation_id=-1, partitions=parts))
    assert r.error == E.NONE


def marker(rm, committed=True) -> None:
    r = rm.write_txn_markers(broker_pb2.WriteTxnMarkersRequest(markers=[broker_pb2.WritableTxnMarker(
        producer_id=PID, producer_epoch=EPOCH, committed=committed, coordinator_epoch=0,
        partitions=[common_pb2.TopicPartition(topic=OFFSETS, partition=0)])]))
    assert r.markers[0].partitions[0].error == E.NONE


def kafka_fetch(kafka, group: str, require_stable: bool, client_id: str = "aiokafka-0.14.0"):
    """An OffsetFetch of partition "in"-0 as the Kafka listener hands it over: (error, offset)."""
    header = RequestHeader(OFFSET_FETCH, 7 if require_stable else 3, 1, client_id)
    req = SimpleNamespace(group_id=group, require_stable=require_stable,
                          topics=[SimpleNamespace(name="in", partition_indexes=[0])])
    p = kafka.offset_fetch(header, req)["topics"][0]["partitions"][0]
    return p["error_code"], p["committed_offset"]


def counts(svc, group: str = "") -> dict:
    r = svc.GroupMetrics(broker_pb2.GroupMetricsRequest(group_id=group), None)
    assert r.broker_id == 1
    return {g.group_id: (g.unstable_offsets_fetched_without_require_stable, g.last_client_id) for g in r.groups}


def test_a_fetch_without_require_stable_while_a_txn_commit_is_pending_is_counted(broker):
    rm, gc, svc, kafka = broker
    commit(gc, "g", 5, transactional=False)
    commit(gc, "g", 10, transactional=True)                       # pending until its marker
    assert kafka_fetch(kafka, "g", require_stable=False) == (E.NONE, 5)     # the stale answer
    assert counts(svc) == {"g": (1, "aiokafka-0.14.0")}
    assert kafka_fetch(kafka, "g", require_stable=False, client_id="other") == (E.NONE, 5)
    assert counts(svc, "g") == {"g": (2, "other")}                # the last such fetch's client id
    assert counts(svc, "elsewhere") == {}


def test_a_require_stable_fetch_is_told_to_retry_and_not_counted(broker):
    rm, gc, svc, kafka = broker
    commit(gc, "g", 10, transactional=True)
    assert kafka_fetch(kafka, "g", require_stable=True, client_id="rdkafka")[0] == E.UNSTABLE_OFFSET_COMMIT
    assert counts(svc) == {}


def test_a_fetch_with_nothing_pending_is_not_counted(broker):
    rm, gc, svc, kafka = broker
    commit(gc, "g", 10, transactional=True)
    marker(rm)                                                    # committed: nothing pending any more
    assert kafka_fetch(kafka, "g", require_stable=False) == (E.NONE, 10)
    commit(gc, "g", 12, transactional=True)
    marker(rm, committed=False)                                   # aborted: nothing pending either
    assert kafka_fetch(kafka, "g", require_stable=False) == (E.NONE, 10)
    commit(gc, "h", 3, transactional=False)
    assert kafka_fetch(kafka, "h", require_stable=False) == (E.NONE, 3)
    assert counts(svc) == {}


def test_a_pending_commit_of_another_group_does_not_count_for_this_one(broker):
    rm, gc, svc, kafka = broker
    commit(gc, "other", 10, transactional=True)
    assert kafka_fetch(kafka, "g", require_stable=False) == (E.NONE, -1)
    assert counts(svc) == {}


def test_the_lab_grpc_fetch_is_counted_too_without_a_client_id(broker):
    rm, gc, svc, kafka = broker
    commit(gc, "g", 10, transactional=True)
    r = svc.OffsetFetch(broker_pb2.OffsetFetchRequest(group_id="g", partitions=[
        common_pb2.TopicPartition(topic="in", partition=0)]), None)
    assert (r.partitions[0].error, r.partitions[0].offset) == (E.NONE, -1)
    assert counts(svc) == {"g": (1, "")}
