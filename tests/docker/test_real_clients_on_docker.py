"""librdkafka against the compose cluster's Kafka listeners (container addresses, port 9192)."""
import time
import uuid

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
pytest.importorskip("confluent_kafka")


def test_confluent_kafka_transactions_on_the_compose_cluster(docker_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
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
    assert got == [f"c{i}" for i in range(5)] + [f"d{i}" for i in range(5)]
