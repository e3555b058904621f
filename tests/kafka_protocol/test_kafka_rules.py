"""Kafka's rules a real client relies on, checked on the broker's Kafka handlers (BrokerApis) with the
lab's services replaced by fakes, and against a real cluster with librdkafka: topic auto-creation from
Metadata, illegal topic names, and the produce path's answer to a fenced producer."""
import os
import time
import uuid
from types import SimpleNamespace as NS

import pytest

from eoslab.common import record_batch as rb
from eoslab.common import kafka_records as kr
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker.metadata_cache import MetadataCache
from services.kafka_protocol.broker_apis import BrokerApis


class _Svc:
    def __init__(self, produce_error=E.NONE):
        self.created: list[broker_pb2.CreatableTopic] = []
        self.produce_error = produce_error

    def CreateTopics(self, req, context):   # noqa: N802 - the gRPC servicer's name
        self.created.extend(req.topics)
        return broker_pb2.CreateTopicsResponse(topics=[broker_pb2.CreateTopicResult(
            name=t.name, error=E.NONE, num_partitions=t.num_partitions, replication_factor=3) for t in req.topics])

    def create_topics(self, req, wait_s):    # Metadata's auto-creation: the servicer's call that does not wait
        assert wait_s == 0
        return self.CreateTopics(req, None)

    def Fetch(self, req, context):   # noqa: N802 - the gRPC servicer's name
        self.fetched = req
        return broker_pb2.FetchResponse()

    def _produce(self, req):
        resp = broker_pb2.ProduceResponse(correlation_id=req.correlation_id)
        for p in req.partitions:
            resp.partitions.add(topic=p.topic, partition=p.partition, error=self.produce_error, base_offset=-1)
        return resp


def _apis(auto_create=True, svc=None, num_partitions=1) -> BrokerApis:
    apis = BrokerApis.__new__(BrokerApis)
    apis.s = NS(metadata=MetadataCache(), broker_id=0, auto_create_topics_enable=auto_create,
                num_partitions=num_partitions,
                faults=NS(should_drop=lambda req: False))
    apis.svc = svc or _Svc()
    apis.endpoints = NS(broker=lambda node: None)
    return apis


def _metadata(apis, names, version=12, allow=True) -> dict:
    req = NS(topics=[NS(name=n) for n in names], allow_auto_topic_creation=allow)
    out = apis.metadata(NS(api_version=version), req)
    return {t["name"]: t["error_code"] for t in out["topics"]}


def test_metadata_for_an_unknown_topic_creates_it_and_answers_leader_not_available():
    apis = _apis()
    assert _metadata(apis, ["fresh"]) == {"fresh": E.LEADER_NOT_AVAILABLE}
    assert [(t.name, t.num_partitions, t.replication_factor) for t in apis.svc.created] == [("fresh", 1, 0)]


def test_an_auto_created_topic_and_a_create_topics_with_minus_one_get_the_broker_s_num_partitions():
    apis = _apis(num_partitions=4)
    assert _metadata(apis, ["fresh"]) == {"fresh": E.LEADER_NOT_AVAILABLE}
    out = apis.create_topics(NS(api_version=7), NS(validate_only=False, timeout=0, topics=[
        NS(name="defaults", num_partitions=-1, replication_factor=-1, configs=[], assignments=[]),
        NS(name="given", num_partitions=2, replication_factor=1, configs=[], assignments=[])]))
    assert [t["error_code"] for t in out["topics"]] == [E.NONE, E.NONE]
    assert [(t.name, t.num_partitions, t.replication_factor) for t in apis.svc.created] == [
        ("fresh", 4, 0), ("defaults", 4, 0), ("given", 2, 1)]      # 0: the controller's default factor


@pytest.mark.parametrize("partitions,rf,error", [(0, 3, E.INVALID_PARTITIONS), (-5, 3, E.INVALID_PARTITIONS),
                                                 (1, 0, E.INVALID_REPLICATION_FACTOR),
                                                 (1, -2, E.INVALID_REPLICATION_FACTOR)])
def test_create_topics_with_no_partitions_or_replicas_is_refused_before_the_controller(partitions, rf, error):
    apis = _apis()
    out = apis.create_topics(NS(api_version=7), NS(validate_only=False, timeout=0, topics=[
        NS(name="bad", num_partitions=partitions, replication_factor=rf, configs=[], assignments=[]),
        NS(name="good", num_partitions=1, replication_factor=1, configs=[], assignments=[])]))
    assert {t["name"]: t["error_code"] for t in out["topics"]} == {"bad": error, "good": E.NONE}
    assert [t.name for t in apis.svc.created] == ["good"]


def test_a_fetch_naming_a_partition_many_times_reads_it_once_and_the_answer_is_capped():
    apis = _apis()
    part = lambda off: NS(partition=0, fetch_offset=off, current_leader_epoch=-1, partition_max_bytes=1 << 20)  # noqa: E731
    req = NS(max_wait=0, min_bytes=1, max_bytes=2 ** 31 - 1, isolation_level=0,
             topics=[NS(topic="t", partitions=[part(i) for i in range(40)]), NS(topic="u", partitions=[part(5)])])
    apis.fetch(NS(api_version=12), req)
    got = apis.svc.fetched
    assert [(p.topic, p.partition, p.fetch_offset) for p in got.partitions] == [("t", 0, 39), ("u", 0, 5)]
    assert got.max_bytes == 57671680                 # the broker's fetch.max.bytes, whatever the client asks


@pytest.mark.parametrize("auto_create,allow,version", [(False, True, 12), (True, False, 12), (False, True, 0)])
def test_metadata_without_auto_creation_answers_unknown_topic(auto_create, allow, version):
    apis = _apis(auto_create)
    assert _metadata(apis, ["absent"], version, allow) == {"absent": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert apis.svc.created == []


@pytest.mark.parametrize("auto_create", [True, False])
@pytest.mark.parametrize("name", ["bad name", "a/b", ".", "..", "x" * 250])
def test_metadata_for_an_illegal_topic_name_is_invalid_topic_exception(name, auto_create):
    apis = _apis(auto_create)
    assert _metadata(apis, [name]) == {name: E.INVALID_TOPIC_EXCEPTION}
    assert apis.svc.created == []


def test_a_fenced_producers_write_is_answered_invalid_producer_epoch_on_the_kafka_wire():
    apis = _apis(svc=_Svc(produce_error=E.PRODUCER_FENCED))
    batch = rb.batch_from_encoded(rb.encode_records([(None, b"v", 1000)]), 1, 1000, producer_id=7,
                                  producer_epoch=0, base_sequence=0, transactional=True)
    req = NS(transactional_id="t", acks=-1, timeout=1000,
             topic_data=[NS(name="t1", partition_data=[NS(index=0, records=kr.to_kafka(batch))])])
    out = apis.produce(NS(correlation_id=1, api_version=9), req)
    [part] = out["responses"][0]["partition_responses"]
    assert part["error_code"] == E.INVALID_PRODUCER_EPOCH


# -- against a real cluster ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kcluster(eoslab_home):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-kr-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1)
    rt.up()
    yield rt
    rt.down()


@pytest.mark.integration
def test_librdkafka_produces_to_a_topic_that_does_not_exist_yet(kcluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin  # noqa: F401 - the submodule is not imported by the package
    boot = kcluster.info().kafka_bootstrap
    topic = f"auto-{uuid.uuid4().hex[:6]}"
    p = confluent_kafka.Producer({"bootstrap.servers": boot, "message.timeout.ms": 20000})
    errors = []
    p.produce(topic, b"first", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0 and errors == [None]
    md = confluent_kafka.admin.AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=10)
    assert md.topics[topic].error is None and len(md.topics[topic].partitions) == 1


@pytest.mark.integration
def test_librdkafka_committed_offsets_keep_their_leader_epoch(kcluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin  # noqa: F401 - the submodule is not imported by the package
    from confluent_kafka import TopicPartition
    boot = kcluster.info().kafka_bootstrap
    topic = f"epoch-{uuid.uuid4().hex[:6]}"
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 3)], operation_timeout=30).values():
        f.result(30)
    p = confluent_kafka.Producer({"bootstrap.servers": boot})
    p.produce(topic, b"one")
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline, msg = time.monotonic() + 30, None
        while msg is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            msg = m if m is not None and not m.error() else None
        assert msg is not None and msg.leader_epoch() is not None
        c.commit(message=msg, asynchronous=False)
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert (tp.offset, tp.leader_epoch) == (msg.offset() + 1, msg.leader_epoch())
    finally:
        c.close()


@pytest.mark.integration
def test_a_member_id_starts_with_the_client_id(kcluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    boot = kcluster.info().kafka_bootstrap
    topic = f"mid-{uuid.uuid4().hex[:6]}"
    import confluent_kafka.admin  # noqa: F401 - the submodule is not imported by the package
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 3)], operation_timeout=30).values():
        f.result(30)
    c = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "client.id": "rules-client", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        member = c.memberid()
        assert c.assignment() and member.startswith("rules-client-"), member
        uuid.UUID(member[len("rules-client-"):])
    finally:
        c.close()


def test_describe_cluster_at_a_broker_refuses_a_request_meant_for_controllers():
    apis = _apis()
    out = apis.describe_cluster(NS(api_version=1), NS(include_cluster_authorized_operations=False, endpoint_type=2))
    assert out["error_code"] == E.MISMATCHED_ENDPOINT_TYPE and out["brokers"] == [] and out["controller_id"] == -1
    out = apis.describe_cluster(NS(api_version=1), NS(include_cluster_authorized_operations=False, endpoint_type=1))
    assert out["error_code"] == E.NONE and out["cluster_authorized_operations"] == -2147483648


def test_create_topics_with_an_assignment_and_a_count_is_refused_and_one_without_a_count_is_forwarded():
    apis = _apis()
    manual = [NS(partition_index=0, broker_ids=[2, 1])]
    out = apis.create_topics(NS(api_version=7), NS(validate_only=False, timeout=0, topics=[
        NS(name="both", num_partitions=1, replication_factor=-1, configs=[], assignments=manual),
        NS(name="manual", num_partitions=-1, replication_factor=-1, configs=[], assignments=manual)]))
    assert {t["name"]: t["error_code"] for t in out["topics"]} == {"both": E.INVALID_REQUEST, "manual": E.NONE}
    [sent] = apis.svc.created
    assert sent.name == "manual" and [(a.partition, list(a.broker_ids)) for a in sent.assignments] == [(0, [2, 1])]
