"""What the real-client tests share: a module-scoped local cluster with Kafka listeners (`kcluster`, a
fixture of this package's conftest), topic creation, a read-until-quiet helper through librdkafka and
the stored batches of a partition as its leader holds them (over gRPC)."""
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def start_kcluster(eoslab_home, tag: str = "kp", broker_args: list[str] | None = None, **runtime_args):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-{tag}-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1,
                      broker_args=broker_args, **runtime_args)
    rt.up()
    yield rt
    rt.down()


def _topic(boot: str, name: str, partitions: int = 1, config: dict | None = None) -> str:
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})    # kept until the result: its handle serves the future
    for f in admin.create_topics([NewTopic(name, partitions, 3, config=config or {})],
                                 operation_timeout=30).values():
        f.result(30)
    return name


def _read_all(boot, topic, partitions, isolation, expect, timeout_s=20.0):
    c = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, deadline = [], time.monotonic() + timeout_s
    quiet_until = None
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            if len(got) >= expect:
                quiet_until = quiet_until or time.monotonic() + 1.0   # nothing more may come after
                if time.monotonic() > quiet_until:
                    break
            continue
        got.append(m.value().decode())
    c.close()
    return got


def stored_batches(kcluster, topic: str, partition: int = 0) -> list:
    """The batches the partition's leader stores, from offset 0, read over the lab's gRPC Fetch."""
    from clients.metadata import ClusterMetadata
    from eoslab.v1 import broker_pb2
    from tests import helpers as h
    md = ClusterMetadata(kcluster.bootstrap_all())
    try:
        h.wait_for(lambda: md.refresh([topic]) and md.leader(topic, partition), timeout=20,
                   what=f"{topic}'s leader")
        resp = md.stub(md.leader(topic, partition)[1]).Fetch(broker_pb2.FetchRequest(
            replica_id=-1, max_wait_ms=0, max_bytes=1 << 22, partitions=[broker_pb2.FetchPartition(
                topic=topic, partition=partition, fetch_offset=0, partition_max_bytes=1 << 22)]), timeout=10)
        return list(resp.partitions[0].batches)
    finally:
        md.close()
