"""librdkafka against the compose cluster's Kafka listeners (container addresses, port 9192)."""
import time
import uuid

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
pytest.importorskip("confluent_kafka")


def _read_committed(boot: str, topic: str) -> list[str]:
    """Partition 0 from the beginning at read_committed, until 3 s pass without a record."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, last = [], time.monotonic()
    while time.monotonic() - last < 3:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
            last = time.monotonic()
    c.close()
    return got


def test_confluent_kafka_transactions_on_the_compose_cluster(docker_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    info = docker_cluster.info()
    boot = info.kafka_bootstrap
    assert boot.count(":9192") == 3
    topic = f"dk-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=60).values():
        f.result(60)
    p = Producer({"bootstrap.servers": boot, "transactional.id": f"dk-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(60)
    for kind in ("c", "a", "d"):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"{kind}{i}".encode())
        if kind == "a":
            p.flush(30)
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
    assert _read_committed(boot, topic) == [f"c{i}" for i in range(5)] + [f"d{i}" for i in range(5)]


def test_network_lost_acks_on_docker_reach_the_kafka_listener(docker_cluster):
    # The sidecar drops the leader's answers from its gRPC port and from its Kafka listener: librdkafka's
    # produce gets no answer while the rule is in force, then retries into exactly one copy after heal.
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    boot = docker_cluster.info().kafka_bootstrap
    topic = f"dl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=60).values():
        f.result(60)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
                  "request.timeout.ms": 3000, "message.timeout.ms": 120000})
    p.produce(topic, b"before")
    assert p.flush(60) == 0
    leader = f"broker-{admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader}"
    docker_cluster.drop_responses(leader, [])
    try:
        ports = sorted(d.split("from port ")[1].split()[0] for d in docker_cluster.rules()[leader])
        assert ports == ["9092", "9192"]             # gRPC and the Kafka listener
        p.produce(topic, b"lost-ack")
        assert p.flush(8) == 1                       # written or not, no answer comes back
    finally:
        docker_cluster.heal()
    assert p.flush(120) == 0
    assert _read_committed(boot, topic) == ["before", "lost-ack"]
