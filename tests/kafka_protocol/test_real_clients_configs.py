"""Topic and broker configs through a real admin client (librdkafka's): the configs Kafka Streams and
Connect create their topics with are taken, DescribeConfigs shows what is in force and where it comes
from, AlterConfigs and IncrementalAlterConfigs change it on every broker, and the brokers act on what
they enforce (min.insync.replicas, a compacted topic's keyless record refused)."""
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   ConfigSource, NewTopic, ResourceType)

CONNECT_OFFSETS = {"cleanup.policy": "compact", "min.insync.replicas": "2", "retention.ms": "-1"}
STREAMS_REPARTITION = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                       "message.timestamp.type": "CreateTime", "segment.index.bytes": "10485760"}


def _admin(kcluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": kcluster.info().kafka_bootstrap})


def _create(admin, configs, partitions=1, rf=3) -> str:
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, rf, config=configs)])[name].result(30)
    h.wait_for(lambda: name in admin.list_topics(name, timeout=10).topics and
               admin.list_topics(name, timeout=10).topics[name].error is None, timeout=30, what=f"{name} known")
    return name


def _describe(admin, topic) -> dict:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res])[res].result(30)


def test_streams_and_connect_topic_configs_are_taken_and_described(kcluster):
    admin = _admin(kcluster)
    for configs in (CONNECT_OFFSETS, STREAMS_REPARTITION):
        topic = _create(admin, configs)
        entries = _describe(admin, topic)
        for k, v in configs.items():
            assert entries[k].value == v and entries[k].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, k
        # not set on the topic: Kafka's default, or this broker's own setting where the lab's differs
        assert entries["compression.type"].value == "producer"
        assert entries["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
        assert entries["delete.retention.ms"].value == "86400000"


def test_a_bad_topic_config_is_invalid_config_and_creates_nothing(kcluster):
    admin = _admin(kcluster)
    for configs in ({"cleanup.policy": "shred"}, {"no.such.config": "1"}, {"min.cleanable.dirty.ratio": "1.5"}):
        name = f"cfg-bad-{uuid.uuid4().hex[:8]}"
        with pytest.raises(KafkaException) as e:
            admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
        assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG, configs
        assert name not in admin.list_topics(timeout=10).topics


def test_incremental_alter_configs_changes_what_the_leader_enforces(kcluster):
    admin = _admin(kcluster)
    boot = kcluster.info().kafka_bootstrap
    topic = _create(admin, {"retention.ms": "60000"})
    p = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 5000, "retries": 0})
    errors = []

    def produce():
        errors.clear()
        p.produce(topic, key=b"k", value=b"v", on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
        return errors[0]
    assert produce() is None

    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", "4", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([res])[res].result(30)
    h.wait_for(lambda: _describe(admin, topic)["min.insync.replicas"].value == "4", timeout=30, what="the change")
    entries = _describe(admin, topic)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    # 3 replicas, min.insync.replicas 4: acks=all is refused once the brokers have the new config
    h.wait_for(lambda: produce() is not None and errors[0].code() in (
        confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS, confluent_kafka.KafkaError._MSG_TIMED_OUT),
        timeout=30, what="acks=all refused under min.insync.replicas 4")
    # compacted now: a record without a key is refused whatever the ISR
    admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])])
    h.wait_for(lambda: produce() is None, timeout=30, what="acks=all taken again")
    errors.clear()
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors[0] is not None and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD


def test_alter_configs_replaces_the_set_and_validate_only_changes_nothing(kcluster):
    admin = _admin(kcluster)
    topic = _create(admin, {"retention.ms": "60000", "min.insync.replicas": "2"})
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "3600000"})
    admin.alter_configs([res], validate_only=True)[res].result(30)
    assert _describe(admin, topic)["retention.ms"].value == "60000"
    admin.alter_configs([res])[res].result(30)
    # as in Kafka, each broker takes the change when it hears of it (here: the controller's UpdateMetadata)
    h.wait_for(lambda: _describe(admin, topic)["segment.ms"].value == "3600000", timeout=30, what="the change")
    entries = _describe(admin, topic)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value      # replaced, not merged
    assert entries["min.insync.replicas"].value == "1"
    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    missing = ConfigResource(ResourceType.TOPIC, f"cfg-none-{uuid.uuid4().hex[:6]}", set_config={"retention.ms": "1"})
    with pytest.raises(KafkaException) as e:
        admin.alter_configs([missing])[missing].result(30)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_from_3_2_alter_configs_naming_a_key_twice_is_refused_and_changes_nothing(kcluster):
    from tests.kafka_protocol.test_real_clients_old_releases import alter_configs_naming_a_key_twice
    topic = _create(_admin(kcluster), {})
    invalid_request = 42
    assert alter_configs_naming_a_key_twice(kcluster.info().kafka_bootstrap, topic, "2000") == \
        (invalid_request, "604800000")


def test_from_2_7_altering_an_unknown_topic_s_configs_is_unknown_topic_or_partition(kcluster):
    from tests.kafka_protocol.test_real_clients_old_releases import alter_configs_of_an_unknown_topic
    assert alter_configs_of_an_unknown_topic(kcluster.info().kafka_bootstrap)[0] == 3


def test_describe_configs_of_a_broker_lists_its_settings_and_refuses_changes(kcluster):
    admin = _admin(kcluster)
    node = min(admin.list_topics(timeout=10).brokers)
    res = ConfigResource(ResourceType.BROKER, str(node))
    entries = admin.describe_configs([res])[res].result(30)
    assert entries["broker.id"].value == str(node) and entries["broker.id"].is_read_only
    assert entries["num.partitions"].value.isdigit()
    change = ConfigResource(ResourceType.BROKER, str(node), set_config={"num.partitions": "3"})
    with pytest.raises(KafkaException) as e:
        admin.alter_configs([change])[change].result(30)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST


def test_delete_records_moves_the_log_start_offset_on_every_replica(kcluster):
    """DeleteRecords through librdkafka's admin client: the low watermark is answered once the followers
    have it, readers start there, and a new leader (the old one killed) starts there too."""
    from confluent_kafka import Consumer, TopicPartition
    admin = _admin(kcluster)
    boot = kcluster.info().kafka_bootstrap
    topic = _create(admin, {})
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for i in range(50):
        p.produce(topic, key=b"k", value=b"%d" % i)
    assert p.flush(30) == 0
    done = admin.delete_records([TopicPartition(topic, 0, 20)], request_timeout=30, operation_timeout=30)
    low = list(done.values())[0].result(30)
    assert low.low_watermark == 20                               # every replica has it
    past = admin.delete_records([TopicPartition(topic, 0, 51)], operation_timeout=30)
    with pytest.raises(KafkaException) as e:
        list(past.values())[0].result(30)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE

    def first_read():
        c = Consumer({"bootstrap.servers": boot, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            # from the beginning, not from the group's committed offset: librdkafka leaves a partition whose
            # assign-time OffsetFetch is answered NOT_COORDINATOR unread until it is assigned again, and a
            # group coordinator found through a broker that learned of a new __consumer_offsets partition's
            # leader before that leader did answers so (as in Kafka)
            c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
            first = h.wait_for(lambda: (lambda m: m if m is not None and m.error() is None else None)(c.poll(1)),
                               timeout=60, what="the first record")
            return lo, hi, first.offset()
        finally:
            c.close()
    assert first_read() == (20, 50, 20)
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    node = next(n for n in kcluster.info().by_role("broker") if n.node_id == leader)
    kcluster.kill(node.name)
    try:
        h.wait_for(lambda: admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader not in (-1, leader),
                   timeout=60, what="a new leader")
        assert first_read() == (20, 50, 20)
    finally:
        kcluster.start(node.name)
        h.wait_for(lambda: leader in admin.list_topics(timeout=10).brokers, timeout=60, what="the broker back")


def test_a_coordinator_relays_topic_and_config_requests_to_a_broker(kcluster):
    """Admin clients send these to any node of Metadata, the coordinators too: the answer is a broker's."""
    import socket

    from cluster.local_nodes import KAFKA_PORT
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    admin = _admin(kcluster)
    topic = _create(admin, {"retention.ms": "12345"})
    name = f"cfg-relayed-{uuid.uuid4().hex[:6]}"
    node = kcluster.info().by_role("txn-coordinator")[0]
    with socket.create_connection((node.host, KAFKA_PORT), timeout=60) as s:
        def described():            # the broker it is relayed to may hear of the new topic a moment later
            s.sendall(_request(32, 4, 7, resources=[{"resource_type": 2, "resource_name": topic,
                                                     "configuration_keys": ["retention.ms"]}],
                               include_synonyms=False, include_documentation=False))
            corr, r = _response(_read_frame(s), 32, 4)
            assert corr == 7
            return r if r.results[0].error_code.value == 0 else None
        r = h.wait_for(described, timeout=30, what=f"{topic} described through the coordinator")
        assert [(c.name, c.value) for c in r.results[0].configs] == [("retention.ms", "12345")]
        s.sendall(_request(19, 7, 8, topics=[{"name": name, "num_partitions": 2, "replication_factor": 1,
                                              "assignments": [], "configs": []}], timeout=30000,
                           validate_only=False))
        corr, r = _response(_read_frame(s), 19, 7)
        assert corr == 8 and r.topics[0].error_code.value == 0, r
    # answered once the broker it was relayed to had the topic; the others learn it from the same UpdateMetadata
    h.wait_for(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2, timeout=30,
               what="the relayed topic's two partitions")


def test_topics_have_ids_in_metadata_and_deletetopics_takes_one(kcluster):
    """Kafka's topic ids (kept in the topic's znode as ZooKeeper-mode Kafka keeps them): Metadata v10+
    names them, a topic created again gets a new one, and DeleteTopics v6 deletes by id."""
    import socket

    from confluent_kafka import TopicCollection
    from cluster.local_nodes import KAFKA_PORT
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    admin = _admin(kcluster)
    topic = _create(admin, {})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    first = desc.topic_id
    assert first is not None and str(first) not in ("", "AAAAAAAAAAAAAAAAAAAAAA")
    node = kcluster.info().by_role("broker")[0]
    with socket.create_connection((node.host, KAFKA_PORT), timeout=60) as s:
        def topic_id():             # this broker may hear of the new topic a moment after the one that created it
            s.sendall(_request(3, 12, 1, topics=[{"name": topic, "topic_id": None}],
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            _, md = _response(_read_frame(s), 3, 12)
            t = md.topics[0]
            return t.topic_id if t.error_code.value == 0 else None
        tid = h.wait_for(topic_id, timeout=30, what=f"broker {node.name} naming {topic}'s id")
        assert tid.int != 0
        gone = __import__("uuid").uuid4()
        s.sendall(_request(20, 6, 2, topics=[{"name": None, "topic_id": tid}, {"name": None, "topic_id": gone}],
                           timeout=30000))
        _, r = _response(_read_frame(s), 20, 6)
    assert [(x.name, x.error_code.value, x.topic_id) for x in r.responses] == [(topic, 0, tid), (None, 100, gone)]
    h.wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, timeout=30, what="the topic deleted")


def test_a_consumer_groups_own_configs_are_set_described_and_refused_as_kafka_4_does(kcluster):
    """KIP-848 group configs through librdkafka: IncrementalAlterConfigs on a GROUP resource, then
    DescribeConfigs shows the group's value (GROUP_CONFIG) beside the broker's default."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigSource, ResourceType
    admin = AdminClient({"bootstrap.servers": kcluster.info().kafka_bootstrap})
    group = f"gc-{uuid.uuid4().hex[:6]}"

    def alter(*entries):
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries])
        try:
            admin.incremental_alter_configs([res])[res].result(30)
            return None
        except KafkaException as e:
            return e.args[0].code()

    def described():
        res = ConfigResource(ResourceType.GROUP, group)
        got = admin.describe_configs([res])[res].result(30)
        return {n: (e.value, e.source) for n, e in got.items()}

    before = described()
    assert before["consumer.session.timeout.ms"][1] == ConfigSource.DEFAULT_CONFIG.value
    assert alter(("consumer.session.timeout.ms", "50000", AlterConfigOpType.SET)) is None
    after = described()
    assert after["consumer.session.timeout.ms"] == ("50000", ConfigSource.GROUP_CONFIG.value)
    assert after["consumer.heartbeat.interval.ms"] == before["consumer.heartbeat.interval.ms"]
    assert alter(("consumer.session.timeout.ms", "70000", AlterConfigOpType.SET)) == KafkaError.INVALID_CONFIG
    assert alter(("consumer.no.such.config", "1", AlterConfigOpType.SET)) == KafkaError.INVALID_CONFIG
    assert described()["consumer.session.timeout.ms"] == ("50000", ConfigSource.GROUP_CONFIG.value)   # unchanged
    assert alter(("consumer.session.timeout.ms", "", AlterConfigOpType.DELETE)) is None
    assert described()["consumer.session.timeout.ms"] == before["consumer.session.timeout.ms"]


def test_dynamic_broker_configs_are_taken_described_and_applied_as_kafka_does(kcluster):
    """AlterConfigs / IncrementalAlterConfigs on a broker and on the cluster default, through librdkafka:
    Kafka's dynamic names only (the per-broker ones not at the default), described as dynamic, and a
    dynamic message.max.bytes default applied by every partition leader at once."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigSource
    admin = _admin(kcluster)
    node = str(min(admin.list_topics(timeout=10).brokers))

    def alter(name, entries, incremental=True):
        if incremental:
            res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
                ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries])
            fut = admin.incremental_alter_configs([res])[res]
        else:
            res = ConfigResource(ResourceType.BROKER, name, set_config={n: v for n, v, _ in entries})
            fut = admin.alter_configs([res])[res]
        try:
            fut.result(30)
            return None
        except KafkaException as e:
            return e.args[0].code()

    SET, APPEND = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    assert alter(node, [("sasl.kerberos.min.time.before.relogin", "58000", SET)], incremental=False) is None
    assert alter(node, [("background.threads", "9", SET), ("log.cleanup.policy", "compact", APPEND)]) is None
    res = ConfigResource(ResourceType.BROKER, node)
    got = admin.describe_configs([res])[res].result(30)
    assert (got["background.threads"].value, got["background.threads"].source) == (
        "9", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert got["log.cleanup.policy"].value == "delete,compact"         # appended to Kafka's default
    assert alter(node, [("num.partitions", "3", SET)]) == KafkaError.INVALID_REQUEST          # not dynamic
    assert alter(node, [("background.threads", "many", SET)]) == KafkaError.INVALID_CONFIG
    assert alter(node, [("log.cleanup.policy", "compact", AlterConfigOpType.DELETE)]) is None

    # The cluster default (resource name ""), which neither PyPI client sends, through the brokers' own
    # store on the cluster's ZooKeeper: every broker takes it from the change notification.
    from kazoo.client import KazooClient
    from eoslab.common import auth
    from eoslab.common.errors import E
    from eoslab.common.config_ops import DELETE, SET as SET_OP
    from services.broker.dynamic_config import DynamicBrokerConfig
    zk = KazooClient(hosts=kcluster.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(kcluster.secret_path)))
    zk.start()
    store = DynamicBrokerConfig(zk, broker_id=-1)
    topic = _create(admin, {})
    boot = kcluster.info().kafka_bootstrap
    try:
        assert store.alter("", [("ssl.protocol", SET_OP, "TLSv1.3")], True, False)[0] == E.INVALID_REQUEST
        assert store.alter("", [("message.max.bytes", SET_OP, "2000")], True, False) == (E.NONE, None)

        def refused():
            errors = []
            p = Producer({"bootstrap.servers": boot, "message.max.bytes": 100000, "retries": 0})
            p.produce(topic, b"x" * 3000, on_delivery=lambda err, msg: errors.append(err and err.code()))
            p.flush(20)
            return errors == [KafkaError.MSG_SIZE_TOO_LARGE]
        h.wait_for(refused, 30, "a 3000-byte record refused under the dynamic message.max.bytes 2000")
        got = admin.describe_configs([res])[res].result(30)
        assert (got["message.max.bytes"].value, got["message.max.bytes"].source) == (
            "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    finally:
        store.alter("", [("message.max.bytes", DELETE, None)], True, False)
        zk.stop()


def test_a_log_append_time_topic_has_its_records_stamped_by_the_leader(kcluster):
    """message.timestamp.type=LogAppendTime: a record librdkafka sends with an old timestamp is read,
    by librdkafka and by the lab's consumer, at the leader's append time, typed LogAppendTime."""
    import time

    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer
    admin = _admin(kcluster)
    boot = kcluster.info().kafka_bootstrap
    topic = _create(admin, {"message.timestamp.type": "LogAppendTime"})
    sent_at = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    p.produce(topic, b"v", timestamp=1_000)                 # a CreateTime from 1970
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": boot, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        msg = h.wait_for(lambda: (lambda m: m if m is not None and m.error() is None else None)(c.poll(1)),
                         timeout=60, what="the record")
    finally:
        c.close()
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and sent_at - 5_000 <= ts <= int(time.time() * 1000)
    [rec] = h.read_partition(kcluster.bootstrap_all(), topic)
    assert rec.timestamp == ts
