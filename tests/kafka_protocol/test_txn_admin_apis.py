"""KIP-664's toolkit on the Kafka wire, in one process: DescribeProducers on any replica, WriteTxnMarkers
from an admin client, DescribeTransactions and ListTransactions with Kafka's rules, and the
PartitionsWithLateTransactionsCount / MaxActiveTransactionDuration gauges on a mock clock.

Each request goes through the listener's dispatch (ApiHandlers) as real bytes where kio can read the
answer back; the brokers' side runs on a real ReplicaManager, the coordinators' on the real
TransactionCoordinator over the in-memory transaction log of tests/unit/test_transaction_coordinator.
"""
import threading
from types import SimpleNamespace as NS

import pytest
from kio.index import load_request_schema

from eoslab.common import auth
from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.log import StoredBatch
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.broker.replica_manager import ReplicaManager
from services.broker.transaction_metrics import LATE_TRANSACTION_BUFFER_MS, TRANSACTION_MAX_TIMEOUT_MS
from services.kafka_protocol import codec, txn_admin_apis
from services.kafka_protocol.apis import ApiHandlers
from services.txn_coordinator.transaction_metadata import TransactionState
from tests.kafka_protocol.test_listener import _request, _response
from tests.unit.test_transaction_coordinator import coordinator, init

pytestmark = pytest.mark.fast


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def rm(tmp_path, clock):
    md = MetadataCache()
    md.update(broker_pb2.UpdateMetadataRequest(partition_states=[
        broker_pb2.PartitionState(topic="t", partition=p, leader=1, replicas=[1, 2]) for p in range(3)]))
    m = ReplicaManager(1, str(tmp_path), LogConfig(), md, time=clock)
    yield m
    m.shutdown()


def become(rm, partition, leader):
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic="t", partition=partition, leader=leader, leader_epoch=0, isr=[1, 2] if
                             leader != 1 else [1], replicas=[1, 2], zk_version=0)
    assert rm.become_leader_or_follower(req).error == E.NONE


def txn_batch(clock, pid=7, seq=0, n=1):
    return rb.build_batch([(None, b"x", clock.milliseconds())] * n, producer_id=pid, producer_epoch=0,
                          base_sequence=seq, transactional=True)


def produce(rm, batch, partition=0):
    req = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000, transactional_id="tx")
    req.partitions.add(topic="t", partition=partition, batch=batch)
    r = rm.append_records(req).partitions[0]
    assert r.error == E.NONE, r
    return r.base_offset


def broker_apis(rm) -> ApiHandlers:
    apis = ApiHandlers()
    apis.rm = rm
    txn_admin_apis.register_broker(apis)
    return apis


def call(apis, key, version, **fields):
    frame = _request(key, version, 3, **fields)[4:]
    corr, resp = _response(apis(frame)[4:], key, version)
    assert corr == 3
    return resp


def describe_producers(apis, partition):
    r = call(apis, 61, 0, topics=[{"name": "t", "partition_indexes": [partition]}])
    [part] = r.topics[0].partitions
    return part.error_code.value, [(s.producer_id, s.last_sequence, s.current_txn_start_offset)
                                   for s in part.active_producers]


def test_a_follower_answers_describe_producers_from_its_own_producer_state(rm, clock):
    become(rm, 0, leader=2)
    p = rm.get_partition("t", 0)
    b = StoredBatch.from_proto(txn_batch(clock, n=3))     # as the leader wrote it, at offset 0
    b.base_offset = 0
    p.append_as_follower([b.to_proto()], leader_hw=0)
    assert describe_producers(broker_apis(rm), 0) == (E.NONE, [(7, 2, 0)])


def test_describe_producers_is_not_leader_or_follower_only_without_a_replica(rm):
    apis = broker_apis(rm)
    assert describe_producers(apis, 2) == (E.NOT_LEADER_OR_FOLLOWER, [])     # the cluster has it, not here
    r = call(apis, 61, 0, topics=[{"name": "nope", "partition_indexes": [0]}])
    assert r.topics[0].partitions[0].error_code.value == E.UNKNOWN_TOPIC_OR_PARTITION


def test_an_admin_clients_write_txn_markers_aborts_a_hanging_transaction(rm, clock):
    become(rm, 0, leader=1)
    first = produce(rm, txn_batch(clock))
    produce(rm, rb.build_batch([(None, b"y", 0)]))
    p = rm.get_partition("t", 0)
    assert p.producer_state.ongoing_txn_first_offsets() == [first]
    r = call(broker_apis(rm), 27, 1, markers=[{"producer_id": 7, "producer_epoch": 0, "transaction_result": False,
                                               "coordinator_epoch": 0,
                                               "topics": [{"name": "t", "partition_indexes": [0]}]}])
    [marker] = r.markers
    assert marker.producer_id == 7
    assert [(t.name, [(x.partition_index, x.error_code.value) for x in t.partitions]) for t in marker.topics] == \
        [("t", [(0, E.NONE)])]
    assert p.producer_state.ongoing_txn_first_offsets() == []
    assert describe_producers(broker_apis(rm), 0) == (E.NONE, [(7, 0, -1)])


def test_write_txn_markers_keeps_the_leaders_epoch_checks(rm, clock):
    become(rm, 0, leader=1)
    produce(rm, txn_batch(clock))
    r = call(broker_apis(rm), 27, 2, markers=[{"producer_id": 7, "producer_epoch": 0, "transaction_result": False,
                                               "coordinator_epoch": -1, "transaction_version": 0,
                                               "topics": [{"name": "t", "partition_indexes": [0, 2]}]}])
    errors = {x.partition_index: x.error_code.value for x in r.markers[0].topics[0].partitions}
    assert errors == {0: E.INVALID_REQUEST, 2: E.INVALID_REQUEST}
    assert "/eoslab.v1.Broker/WriteTxnMarkers" in auth.INTERNAL_METHODS    # gRPC stays cluster-only


def test_late_transactions_and_the_longest_open_one_are_counted_on_leaders_only(rm, clock):
    become(rm, 0, leader=1)
    become(rm, 1, leader=1)
    start = clock.milliseconds()
    produce(rm, txn_batch(clock))
    clock.advance(60.0)
    produce(rm, txn_batch(clock, pid=8), partition=1)
    assert rm.transaction_metrics() == (0, 60000, "t-0")
    bound = TRANSACTION_MAX_TIMEOUT_MS + LATE_TRANSACTION_BUFFER_MS
    clock.advance((bound - 60000) / 1000)                  # partition 0's producer wrote exactly `bound` ago
    assert rm.transaction_metrics() == (0, bound, "t-0")
    clock.advance(0.001)
    assert rm.transaction_metrics() == (1, bound + 1, "t-0")
    clock.advance(60.0)
    assert rm.transaction_metrics() == (2, clock.milliseconds() - start, "t-0")
    become(rm, 0, leader=2)                                # a follower's transactions are not counted
    assert rm.transaction_metrics() == (1, bound + 1, "t-1")


# -- the coordinators' side ------------------------------------------------------------------------------
def coordinator_apis(clock=None):
    c, tsm, markers = coordinator(**({"time": clock} if clock else {}))
    tsm.lock = threading.Lock()
    tsm.owned = {0: tsm.op}
    apis = NS(s=NS(coordinator=c, tsm=tsm), handlers={})
    apis.register = lambda key, lo, hi, fn: apis.handlers.__setitem__(key, fn)
    txn_admin_apis.register_coordinator(apis)
    return apis, c, tsm


def test_describe_transactions_answers_kafkas_fields_and_errors(clock):
    apis, c, tsm = coordinator_apis(clock)
    r = init(c, tid="open")
    clock.advance(5.0)
    assert c.add_partitions("open", r.producer_id, 0, {("t", 1), ("t", 0), ("u", 0)}) == E.NONE
    init(c, tid="idle")
    out = apis.handlers[65](NS(api_version=0), NS(transactional_ids=["open", "idle", "unknown", ""]))
    by_id = {s["transactional_id"]: s for s in out["transaction_states"]}
    assert by_id["open"] == {"error_code": E.NONE, "transactional_id": "open", "transaction_state": "Ongoing",
                             "transaction_timeout": 60000, "transaction_start_time": clock.milliseconds(),
                             "producer_id": r.producer_id, "producer_epoch": 0,
                             "topics": [{"topic": "t", "partitions": [0, 1]}, {"topic": "u", "partitions": [0]}]}
    assert (by_id["idle"]["transaction_state"], by_id["idle"]["transaction_start_time"]) == ("Empty", -1)
    assert by_id["unknown"]["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    assert by_id[""]["error_code"] == E.INVALID_REQUEST
    tsm.op.cache["idle"].state = TransactionState.DEAD
    out = apis.handlers[65](NS(api_version=0), NS(transactional_ids=["idle"]))
    assert out["transaction_states"][0]["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    resp = codec.make(codec.response_class(65, 0), out)          # -1 start times encode (Kafka's "none")
    assert codec.encode_response(65, 0, 1, resp)


def listed(apis, version=1, states=(), pids=(), duration=-1):
    req = NS(state_filters=list(states), producer_id_filters=list(pids), duration_filter=duration)
    out = apis.handlers[66](NS(api_version=version), req)
    return out["error_code"], sorted(s["transactional_id"] for s in out["transaction_states"]), \
        out["unknown_state_filters"]


def test_list_transactions_filters_as_kafkas_coordinator(clock):
    apis, c, tsm = coordinator_apis(clock)
    a = init(c, tid="a")
    assert c.add_partitions("a", a.producer_id, 0, {("t", 0)}) == E.NONE
    clock.advance(10.0)
    b = init(c, tid="b")
    assert c.add_partitions("b", b.producer_id, 0, {("t", 0)}) == E.NONE
    init(c, tid="empty")
    init(c, tid="gone")
    tsm.op.cache["gone"].state = TransactionState.DEAD                   # being expired: never listed
    assert listed(apis) == (E.NONE, ["a", "b", "empty"], [])
    assert listed(apis, states=["Ongoing", "Nope"]) == (E.NONE, ["a", "b"], ["Nope"])
    assert listed(apis, pids=[b.producer_id]) == (E.NONE, ["b"], [])
    # KIP-994: only what has run longer than the filter; a transaction never begun (-1) counts from 0
    assert listed(apis, duration=10000) == (E.NONE, ["empty"], [])
    clock.advance(0.001)
    assert listed(apis, duration=10000, states=["Ongoing"]) == (E.NONE, ["a"], [])
    tsm.owned[1] = NS(loading=True)
    assert listed(apis)[0] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_a_coordinator_hosts_no_partition_for_write_txn_markers():
    apis, _, _ = coordinator_apis()
    req = NS(markers=[NS(producer_id=7, topics=[NS(name="t", partition_indexes=[0, 1])])])
    out = apis.handlers[27](NS(api_version=1), req)
    assert out == {"markers": [{"producer_id": 7, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION},
        {"partition_index": 1, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION}]}]}]}


def test_served_versions_have_kio_schemas():
    for table in (txn_admin_apis.BROKER_VERSIONS, txn_admin_apis.COORDINATOR_VERSIONS):
        for key, (lo, hi) in table.items():
            for v in range(lo, hi + 1):
                assert codec.response_class(key, v) is not None
                assert load_request_schema(key, v) is not None
