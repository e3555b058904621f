"""compression.type on a real cluster with real clients: a topic's codec (or the cluster's dynamic
default) rebuilds what librdkafka sent, the leader stores the rebuilt batch, and librdkafka and
kafka-python read the records, their headers and their transactions back from it."""
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # noqa: E402

from tests.kafka_protocol.real_clients_support import _read_all, _topic, stored_batches  # noqa: E402


def stored_codecs(kcluster, topic: str) -> list[int]:
    """The codec id of each data batch the partition's leader stores."""
    from eoslab.common import record_batch as rb
    return [rb.codec_of(b) for b in stored_batches(kcluster, topic) if not b.attributes & rb.CONTROL_FLAG]


def produce(boot, topic, codec, n, **extra):
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "compression.type": codec,
                  "linger.ms": 20, **extra})
    errors = []
    if "transactional.id" in extra:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=f"v{i}-".encode() + b"x" * 200, headers=[("h", b"%d" % i)],
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    if "transactional.id" in extra:
        p.commit_transaction(30)
    assert p.flush(30) == 0 and errors == []

def test_a_topic_s_compression_type_rebuilds_what_librdkafka_sent(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ct-zstd", config={"compression.type": "zstd"})
    produce(boot, topic, "none", 200)
    expect = [f"v{i}-" + "x" * 200 for i in range(200)]
    assert _read_all(boot, topic, 1, "read_uncommitted", 200) == expect
    assert set(stored_codecs(kcluster, topic)) == {4}
    from kafka import KafkaConsumer
    kp = KafkaConsumer(bootstrap_servers=boot, auto_offset_reset="earliest", enable_auto_commit=False,
                       consumer_timeout_ms=10_000)
    from kafka import TopicPartition as KTP
    kp.assign([KTP(topic, 0)])
    got = [(m.value.decode(), m.headers) for m in kp]
    kp.close()
    assert [v for v, _ in got] == expect
    assert [hd for _, hd in got] == [[("h", b"%d" % i)] for i in range(200)]

def test_a_transaction_rebuilt_with_another_codec_stays_a_transaction(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ct-snappy", config={"compression.type": "snappy"})
    produce(boot, topic, "gzip", 100, **{"transactional.id": f"ct-{uuid.uuid4().hex[:6]}"})
    assert len(_read_all(boot, topic, 1, "read_committed", 100)) == 100
    assert set(stored_codecs(kcluster, topic)) == {2}

def test_the_brokers_dynamic_compression_type_applies_to_topics_without_their_own(kcluster):
    """compression.type set on every broker through IncrementalAlterConfigs (as librdkafka's admin
    client names a broker: by its id) becomes the codec of topics that set none."""
    boot = kcluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    nodes = [str(n.id) for n in admin.describe_cluster().result(30).nodes]

    def alter(value, op):
        for node in nodes:            # librdkafka sends one broker resource per call
            res = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
                ConfigEntry("compression.type", value, incremental_operation=op)])
            admin.incremental_alter_configs([res])[res].result(30)

    alter("lz4", AlterConfigOpType.SET)
    try:
        topic = _topic(boot, "ct-default")
        own = _topic(boot, "ct-own", config={"compression.type": "producer"})

        def last_stored():
            produce(boot, topic, "gzip", 5)
            return stored_codecs(kcluster, topic)[-1]

        h.wait_for(lambda: last_stored() == 3, timeout=30, what="the leader stores the brokers' lz4")
        produce(boot, own, "gzip", 5)
        assert set(stored_codecs(kcluster, own)) == {1}
    finally:
        alter(None, AlterConfigOpType.DELETE)
