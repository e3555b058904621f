"""KIP-392 fetch from follower through a real Kafka client (librdkafka) against a real local cluster whose
brokers each have their own broker.rack (RACK<id>) and Kafka's RackAwareReplicaSelector: the racks are in
Metadata/DescribeCluster and DescribeConfigs, and a consumer whose client.rack is a follower's rack reads
every record in order from that follower (librdkafka's own statistics count the bytes each broker sent),
as librdkafka's test 0101 checks."""
import json
import time
import uuid

import pytest

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # noqa: E402
from tests.kafka_protocol.real_clients_support import _topic, start_kcluster  # noqa: E402

RACKS = ["--broker-rack=RACK{id}",
         "--replica-selector-class=org.apache.kafka.common.replica.RackAwareReplicaSelector"]
COUNT, SIZE = 1000, 100


@pytest.fixture(scope="module")
def rack_cluster(eoslab_home):
    yield from start_kcluster(eoslab_home, "fff", RACKS)


def test_brokers_name_their_racks_in_metadata_and_in_their_configs(rack_cluster):
    boot = rack_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    nodes = admin.describe_cluster().result(30).nodes
    assert len(nodes) == 3 and {n.rack for n in nodes} == {f"RACK{n.id}" for n in nodes}
    for n in nodes:
        configs = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(n.id))])
        entries = list(configs.values())[0].result(30)
        assert entries["broker.rack"].value == f"RACK{n.id}"
        assert entries["replica.selector.class"].value.endswith("RackAwareReplicaSelector")


def test_a_consumer_in_a_followers_rack_reads_everything_from_that_follower(rack_cluster):
    boot = rack_cluster.info().kafka_bootstrap
    topic = _topic(boot, "fff")
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5})
    for i in range(COUNT):
        p.produce(topic, value=(f"msg={i}\n".encode()).ljust(SIZE, b"."))
    assert p.flush(30) == 0
    part = AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=30).topics[topic].partitions[0]
    follower = next(r for r in part.replicas if r != part.leader)
    rxbytes: dict[int, int] = {}

    def stats(text):
        for b in json.loads(text)["brokers"].values():
            if b.get("nodeid", -1) >= 0:
                rxbytes[b["nodeid"]] = b["rxbytes"]

    c = Consumer({"bootstrap.servers": boot, "group.id": f"fff-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.rack": f"RACK{follower}",
                  "statistics.interval.ms": 500, "stats_cb": stats})
    try:
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 60
        while len(got) < COUNT and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(int(m.value().split(b"\n")[0][4:]))
        assert got == list(range(COUNT))
        rxbytes.clear()
        deadline = time.monotonic() + 10
        while len(rxbytes) < 3 and time.monotonic() < deadline:       # the next statistics after the reads
            c.poll(0.2)
    finally:
        c.close()
    assert len(rxbytes) == 3, rxbytes
    assert rxbytes[follower] > COUNT * SIZE, rxbytes
    assert all(rxbytes[follower] > n for b, n in rxbytes.items() if b != follower), (follower, part.leader, rxbytes)
