"""What a cluster of a release before 4.0 (here 2.5) does differently, with real clients.

Message formats v0 and v1: librdkafka told the broker is 0.9.0.0
without asking for ApiVersions (Produce v1 and Fetch v1, magic 0, ListOffsets v0), as librdkafka's 0052 uses
it, and kafka-python pinned to 0.10.1 (Produce v2, magic 1, and the Fetch versions of 0.10.1) produce and
consume; every record reads back with its key, value, offset and the timestamp Kafka gives it, through a
modern consumer and an old one. (librdkafka takes any fallback from 0.10 on as a cue to ask for ApiVersions,
so only 0.9.0.0 keeps it old.)

AlterConfigs before 3.2: a key named twice takes its last value, where 3.2 and later refuse the resource
(test_real_clients_configs has the refusal on 4.0); before 2.7 an unknown topic's is UNKNOWN_SERVER_ERROR.
The kafka-topics.sh stand-in with --zookeeper, as librdkafka's tests call it before 3.0.

The versions 4.0 removed, sent by kafka-python pinned to an old broker (it then asks no ApiVersions and
takes the pinned release's table): CreateTopics v0 and v1 and DeleteTopics v0 (0.10.1, 0.10.2); OffsetCommit
v0 and OffsetFetch v0 (0.8.1), which keep the offset in ZooKeeper, and v1 (0.8.2), which the coordinator
keeps, apart from it, as in Kafka."""
import os
import time
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,  # noqa: E402
                             TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Producer, TopicPartition)

from tests.kafka_protocol.real_clients_support import _topic, start_kcluster  # noqa: E402
from tests.kafka_protocol.test_hanging_toolkit import send  # noqa: E402

OLD = {"0.9": {"api.version.request": False, "broker.version.fallback": "0.9.0.0"}}
KAFKA_PYTHON_0_10 = (0, 10, 1)


@pytest.fixture(scope="module")
def runtime_2_5(eoslab_home):
    release = ["--kafka-version=2.5"]
    yield from start_kcluster(eoslab_home, "old", release, txn_coordinator_args=release)


@pytest.fixture(scope="module")
def cluster_2_5(runtime_2_5):
    return runtime_2_5.info().kafka_bootstrap


def _produce(boot, topic, records, old=None, codec="none", **extra):
    p = Producer({"bootstrap.servers": boot, "compression.codec": codec, "linger.ms": 5, **(OLD[old] if old else {}),
                  **extra})
    offsets, errors = {}, []

    def done(i):
        return lambda err, msg: errors.append(err) if err else offsets.__setitem__(i, msg.offset())
    for i, (k, v, ts) in enumerate(records):
        p.produce(topic, key=k, value=v, timestamp=ts or 0, on_delivery=done(i))
        p.poll(0)
    assert p.flush(30) == 0 and errors == []
    return [offsets[i] for i in range(len(records))]


def _consume(boot, topic, count, old=None):
    """(offset, key, value, (timestamp type, timestamp)) of the first `count` records, from the log start."""
    c = Consumer({"bootstrap.servers": boot, "group.id": f"fmt-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **(OLD[old] if old else {})})
    # from the log start: ListOffsets (v0 for an old client), and no OffsetFetch, whose NOT_COORDINATOR
    # while a new __consumer_offsets gets its leaders would leave the partition unread (librdkafka)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, errors = [], []

    def more():
        m = c.poll(0.5)
        if m is not None:
            if m.error():
                errors.append(m.error().code())
            else:
                got.append((m.offset(), m.key(), m.value(), m.timestamp()))
        return len(got) >= count or errors
    try:
        h.wait_for(more, timeout=40, what=f"{count} records of {topic}")
    finally:
        c.close()
    assert len(got) >= count, [o for o, *_ in got]
    assert errors == []
    return got


RECORDS = [(b"k%d" % i, b"v%d" % i * 20, None) for i in range(30)] + [(None, b"no key", None), (b"tomb", None, None)]


@pytest.mark.parametrize("codec", ["none", "gzip"])
@pytest.mark.parametrize("ts_type", ["CreateTime", "LogAppendTime"])
def test_a_0_9_producer_s_messages_get_no_create_time_and_the_broker_s_append_time(cluster_2_5, ts_type, codec):
    """0052's 0.9.0.0 rounds: magic 0 carries no timestamp; LogAppendTime stamps the broker's."""
    topic = _topic(cluster_2_5, f"fmt09-{codec}", config={"message.timestamp.type": ts_type})
    before = int(time.time() * 1000)
    offsets = _produce(cluster_2_5, topic, RECORDS, old="0.9", codec=codec)
    after = int(time.time() * 1000)
    assert offsets == list(range(len(RECORDS)))
    got = _consume(cluster_2_5, topic, len(RECORDS))
    assert [(o, k, v) for o, k, v, _ in got] == [(i, k, v) for i, (k, v, _) in enumerate(RECORDS)]
    for _, _, _, (kind, ts) in got:
        if ts_type == "CreateTime":
            assert (kind, ts) in ((TIMESTAMP_NOT_AVAILABLE, -1), (TIMESTAMP_CREATE_TIME, -1))
        else:
            assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= after + 1000


def _kp_produce(boot, topic, records, codec):
    from kafka import KafkaProducer
    assert KafkaProducer.max_usable_produce_magic(KAFKA_PYTHON_0_10) == 1
    p = KafkaProducer(bootstrap_servers=boot, api_version=KAFKA_PYTHON_0_10, linger_ms=20,
                      compression_type=None if codec == "none" else codec)
    futures = [p.send(topic, key=k, value=v, timestamp_ms=ts) for k, v, ts in records]
    p.flush()
    offsets = [f.get(30).offset for f in futures]
    p.close()
    return offsets


def _kp_consume(boot, topic, count):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=boot, api_version=KAFKA_PYTHON_0_10, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.assign([KTP(topic, 0)])
    got = []

    def more():
        for msgs in c.poll(500).values():
            got.extend((m.offset, m.key, m.value, (m.timestamp_type, m.timestamp)) for m in msgs)
        return len(got) >= count
    try:
        h.wait_for(more, timeout=40, what=f"{count} records of {topic} (kafka-python {KAFKA_PYTHON_0_10})")
    finally:
        c.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_a_0_10_client_keeps_its_create_times_both_ways(cluster_2_5, codec):
    """Produce v2 with magic 1 up-converted; read back down-converted by the same old client and as v2 batches
    by a modern one."""
    topic = _topic(cluster_2_5, f"fmt10-{codec}")
    records = [(k, v, 1_600_000_000_000 + i) for i, (k, v, _) in enumerate(RECORDS)]
    assert _kp_produce(cluster_2_5, topic, records, codec) == list(range(len(records)))
    assert _kp_consume(cluster_2_5, topic, len(records)) == [(i, k, v, (0, ts)) for i, (k, v, ts) in enumerate(records)]
    assert _consume(cluster_2_5, topic, len(records)) == [(i, k, v, (TIMESTAMP_CREATE_TIME, ts))
                                                          for i, (k, v, ts) in enumerate(records)]


@pytest.mark.parametrize("old", ["0.9", "kafka-python-0.10"])
def test_an_old_consumer_reads_a_modern_producer_s_batches_at_their_offsets_without_markers(cluster_2_5, old):
    """Compressed v2 batches of a transactional producer, a committed and an aborted transaction between them:
    the old consumer (no isolation) reads every data record at its own offset and never a marker."""
    topic = _topic(cluster_2_5, f"fmtold-{old}")
    first = _produce(cluster_2_5, topic, RECORDS[:10], codec="gzip", **{"linger.ms": 50})
    p = Producer({"bootstrap.servers": cluster_2_5, "transactional.id": f"fmt-{uuid.uuid4().hex[:6]}",
                  "compression.codec": "snappy", "linger.ms": 50})
    p.init_transactions(30)
    txn_offsets = []
    for commit in (True, False):
        p.begin_transaction()
        for k, v, _ in RECORDS[10:15]:
            p.produce(topic, key=k, value=v, on_delivery=lambda err, msg: txn_offsets.append(msg.offset()))
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    last = _produce(cluster_2_5, topic, RECORDS[15:20], codec="lz4")
    # data records: 10, then 5 committed, marker, 5 aborted, marker, 5: offsets 0-9, 10-14, 16-20, 22-26
    assert first == list(range(10)) and sorted(txn_offsets) == list(range(10, 15)) + list(range(16, 21))
    assert last == list(range(22, 27))
    if old == "0.9":
        got = _consume(cluster_2_5, topic, 25, old=old)
    else:
        got = _kp_consume(cluster_2_5, topic, 25)
    want = list(range(0, 15)) + list(range(16, 21)) + list(range(22, 27))
    assert [o for o, *_ in got] == want
    values = [v for _, _, v, _ in got]
    assert values == [v for _, v, _ in RECORDS[:15] + RECORDS[10:15] + RECORDS[15:20]]


def test_zstd_is_refused_to_an_old_consumer_and_read_by_a_new_one(cluster_2_5):
    topic = _topic(cluster_2_5, "fmtz")
    _produce(cluster_2_5, topic, RECORDS[:5], codec="zstd")
    assert len(_consume(cluster_2_5, topic, 5)) == 5
    c = Consumer({"bootstrap.servers": cluster_2_5, "group.id": f"fmt-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **OLD["0.9"]})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []

    def refused():
        m = c.poll(0.5)
        if m is not None:
            seen.append(m.error().code() if m.error() else m.offset())
        return seen
    try:
        h.wait_for(refused, timeout=30, what="the old consumer's answer for a zstd batch")
    finally:
        c.close()
    assert seen[0] == KafkaError.UNSUPPORTED_COMPRESSION_TYPE


def alter_configs_naming_a_key_twice(boot, topic, expect: str) -> tuple[int, str]:
    """AlterConfigs v1 setting retention.ms to 1000 and then 2000 in one resource: (the resource's error code,
    retention.ms as DescribeConfigs reads it once it shows `expect`, or after 10 s). The controller applies
    the change and the brokers learn it a moment later, as Kafka's learn it from ZooKeeper."""
    r = send(boot.split(",")[0], 33, 1, validate_only=False, resources=[
        {"resource_type": 2, "resource_name": topic,
         "configs": [{"name": "retention.ms", "value": "1000"}, {"name": "retention.ms", "value": "2000"}]}])
    seen = []

    def described():
        d = send(boot.split(",")[0], 32, 1, include_synonyms=False, resources=[
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}])
        seen.append(d.results[0].configs[0].value)
        return seen[-1] == expect
    try:
        h.wait_for(described, timeout=10, what=f"retention.ms {expect}")
    except AssertionError:
        pass                                     # the caller compares what was read last
    return r.responses[0].error_code.value, seen[-1]


def test_before_3_2_alter_configs_takes_the_last_value_of_a_key_named_twice(cluster_2_5):
    topic = _topic(cluster_2_5, "dupkeys")
    assert alter_configs_naming_a_key_twice(cluster_2_5, topic, "2000") == (0, "2000")


def alter_configs_of_an_unknown_topic(boot) -> tuple[int, str]:
    r = send(boot.split(",")[0], 33, 1, validate_only=False, resources=[
        {"resource_type": 2, "resource_name": "no-such-topic", "configs": [{"name": "retention.ms", "value": "1"}]}])
    return r.responses[0].error_code.value, r.responses[0].error_message


def test_before_2_7_altering_an_unknown_topic_s_configs_is_an_unknown_server_error(cluster_2_5):
    """AdminZkClient.validateTopicConfig's AdminOperationException (test_real_clients_configs has 2.7's answer)."""
    assert alter_configs_of_an_unknown_topic(cluster_2_5) == (-1, 'Topic "no-such-topic" does not exist.')


def test_the_topics_tool_with_zookeeper_finds_the_brokers_in_their_registrations(runtime_2_5):
    """kafka-topics.sh --zookeeper (librdkafka's test_kafka_topics before 3.0) through the stand-in."""
    import subprocess
    import sys
    info = runtime_2_5.info()
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "kafka_tools.py")
    topic = f"zk-made-{uuid.uuid4().hex[:6]}"
    run = subprocess.run([sys.executable, tool, "topics", "--zookeeper", info.zookeeper, "--create", "--topic", topic,
                          "--partitions", "3", "--replication-factor", "2", "--config", "cleanup.policy=compact"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": info.kafka_bootstrap})
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(md.partitions) == 3 and all(len(p.replicas) == 2 for p in md.partitions.values())
    res = ConfigResource(ResourceType.TOPIC, topic)
    assert admin.describe_configs([res])[res].result(30)["cleanup.policy"].value == "compact"
    # no Kafka listener registered in that ZooKeeper (a wrong address): one line and status 1
    wrong = subprocess.run([sys.executable, tool, "topics", "--zookeeper", "127.0.0.1:1", "--list"],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and len(wrong.stderr.strip().splitlines()) == 1


def _kp_versions(pin, *request_classes):
    from kafka.protocol.broker_version_data import BrokerVersionData
    return [BrokerVersionData(pin).api_version(cls) for cls in request_classes]


def test_kafka_python_pinned_to_0_10_creates_and_deletes_topics_with_the_versions_4_0_removed(cluster_2_5):
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    assert _kp_versions((0, 10, 1), CreateTopicsRequest, DeleteTopicsRequest) == [0, 0]
    assert _kp_versions((0, 10, 2), CreateTopicsRequest, DeleteTopicsRequest) == [1, 0]
    v0 = KafkaAdminClient(bootstrap_servers=cluster_2_5, api_version=(0, 10, 1))
    v1 = KafkaAdminClient(bootstrap_servers=cluster_2_5, api_version=(0, 10, 2))
    modern = AdminClient({"bootstrap.servers": cluster_2_5})
    name = f"old-admin-{uuid.uuid4().hex[:6]}"
    spec = {name: {"num_partitions": 3, "replication_factor": 2, "configs": {"cleanup.policy": "compact"}}}
    try:
        assert v1.create_topics(spec, timeout_ms=30000, validate_only=True)["topics"][0]["error_code"] == 0
        assert name not in modern.list_topics(timeout=10).topics                  # v1's validate_only: a check
        assert v0.create_topics(spec, timeout_ms=30000)["topics"][0]["error_code"] == 0
        md = modern.list_topics(name, timeout=10).topics[name]
        assert len(md.partitions) == 3 and all(len(p.replicas) == 2 for p in md.partitions.values())
        with pytest.raises(TopicAlreadyExistsError):
            v0.create_topics(spec, timeout_ms=30000)
        assert v0.delete_topics([name], timeout_ms=30000)["topics"][0]["error_code"] == 0
        assert name not in modern.list_topics(timeout=10).topics
        with pytest.raises(UnknownTopicOrPartitionError):
            v0.delete_topics([name], timeout_ms=30000)
    finally:
        v0.close()
        v1.close()


def _kp_offsets(boot, pin, group, tp, commit=None):
    """kafka-python pinned to `pin`: commit `commit` (when given) for `tp`, then its committed offset."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    c = KafkaConsumer(bootstrap_servers=boot, api_version=pin, group_id=group, enable_auto_commit=False)
    try:
        c.assign([tp])
        if commit is not None:
            c.commit({tp: OffsetAndMetadata(commit, "", -1)})
        return c.committed(tp)
    finally:
        c.close()


def test_kafka_python_0_8_1_commits_in_zookeeper_and_0_8_2_with_the_coordinator_apart_from_it(runtime_2_5):
    """KafkaApis: OffsetCommit v0 always stores to ZooKeeper and OffsetFetch v0 reads it from there; v1 goes to
    the group coordinator (__consumer_offsets). kafka-python 0.8.1 sends v0 to any broker, 0.8.2 v1 to the
    group's coordinator, which it finds with FindCoordinator v0."""
    from kafka import TopicPartition as KTP
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    from kazoo.client import KazooClient
    assert _kp_versions((0, 8, 1), OffsetCommitRequest, OffsetFetchRequest) == [0, 0]
    assert _kp_versions((0, 8, 2), OffsetCommitRequest, OffsetFetchRequest) == [1, 1]
    info = runtime_2_5.info()
    boot = info.kafka_bootstrap
    tp, group = KTP(_topic(boot, "zkoffsets"), 0), f"old-{uuid.uuid4().hex[:6]}"

    def committed_v0():
        try:
            return _kp_offsets(boot, (0, 8, 1), group, tp, commit=41) == 41
        except Exception:  # noqa: BLE001 - UNKNOWN_TOPIC_OR_PARTITION until every broker has the new topic
            return False
    h.wait_for(committed_v0, timeout=30, what="an OffsetCommit v0 and its OffsetFetch v0")
    zk = KazooClient(hosts=info.zookeeper)
    zk.start(timeout=30)
    try:
        assert zk.get(f"/consumers/{group}/offsets/{tp.topic}/0")[0] == b"41"      # Kafka's path and encoding
    finally:
        zk.stop()
        zk.close()
    assert _kp_offsets(boot, (0, 8, 2), group, tp) is None                # the coordinator has none
    assert _kp_offsets(boot, (0, 8, 2), group, tp, commit=7) == 7
    assert _kp_offsets(boot, (0, 8, 1), group, tp) == 41                 # each keeps its own
