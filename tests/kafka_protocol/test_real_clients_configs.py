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
    entries = _describe(admin, topic)
    assert entries["min.insync.replicas"].value == "4"
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
    entries = _describe(admin, topic)
    assert entries["segment.ms"].value == "3600000"
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
