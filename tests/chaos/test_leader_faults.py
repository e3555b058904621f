"""`partition-leader` on a real local cluster: the leader of the workload's partition is cut from every
other node (brokers, controllers, ZooKeeper) and only from them, so it becomes a zombie leader.

What Kafka (ZooKeeper mode) does then, and the lab must do too: the controller elects another leader once
the cut leader's ZooKeeper session expires, and cannot tell it; a client that still reaches it has
acks=1 records acknowledged; after the heal it learns it is a follower and truncates them: acknowledged
records lost. acks=all records are refused meanwhile (it cannot shrink its ISR without ZooKeeper).
"""
import random
import uuid

import pytest

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster import nemesis as nem
from tests import helpers as h

CLUSTER_ARGS = {"txn_coordinators": 0}


def _leader(md: ClusterMetadata, topic: str) -> int | None:
    try:
        md.refresh([topic])
    except Exception:  # noqa: BLE001 - a broker mid-election
        return None
    ld = md.leader(topic, 0)
    return ld[0] if ld else None


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_partitioned_leader_is_a_zombie_whose_acks_1_records_the_heal_truncates(shared):
    rt = shared
    topic = f"zombie-leader-{uuid.uuid4().hex[:6]}"
    md = ClusterMetadata(rt.bootstrap_all())
    create_topic(md, topic, 1, replication_factor=3, configs={"min.insync.replicas": "1"})
    old = h.wait_for(lambda: _leader(md, topic), timeout=30, what="a leader")
    zombie = rt.info().node(f"broker-{old}")
    others = [n for n in rt.info().nodes if n.role == "broker" and n.name != zombie.name]
    before = KafkaProducer(rt.bootstrap_all(), ProducerConfig.from_props({"acks": "all", "linger.ms": "0"}))
    for i in range(5):
        before.send(topic, b"before-%d" % i, partition=0).result(30)
    before.close()

    ctx = nem.Context(rt, None, topic, 1, md, random.Random(3))
    pkg = nem.PACKAGES["partition-leader"]
    started = pkg.start(ctx)
    healed = False
    try:
        assert started["node"] == zombie.name
        assert sorted(b for a, b in started["cut"]) == sorted(n.name for n in rt.info().nodes if n.name != zombie.name)
        # the rest of the cluster moves on: another broker leads once the cut one's session expired
        md_rest = ClusterMetadata(others[0].address)
        h.wait_for(lambda: _leader(md_rest, topic) not in (None, old), timeout=60, what="a new leader")
        md_rest.close()
        # the zombie, asked directly, still takes acks=1 records (and answers them as their leader)
        to_zombie = KafkaProducer(zombie.address, ProducerConfig.from_props({
            "acks": "1", "enable.idempotence": "false", "linger.ms": "0", "retries": "0"}))
        acked = [to_zombie.send(topic, b"zombie-%d" % i, partition=0).result(10) for i in range(5)]
        assert [m.offset for m in acked] == [5, 6, 7, 8, 9]
        strict = KafkaProducer(zombie.address, ProducerConfig.from_props({
            "acks": "all", "linger.ms": "0", "retries": "0", "delivery.timeout.ms": "3000",
            "request.timeout.ms": "2500"}))
        with pytest.raises(Exception):     # noqa: B017 - NOT_ENOUGH_REPLICAS or a timeout: never acknowledged
            strict.send(topic, b"strict", partition=0).result(10)
        to_zombie.close(1)
        strict.close(1)
        pkg.stop(ctx, started)
        healed = True
    finally:
        if not healed:
            pkg.stop(ctx, started)
    # after the heal the zombie follows the new leader and cuts what only it had
    c = KafkaConsumer(rt.bootstrap_all(), max_wait_ms=500)
    try:
        def settled():
            c.assign([(topic, 0)])
            c.seek_to_beginning()
            return [r.value for r in c.read_all([(topic, 0)], timeout=10)]
        values = h.wait_for(lambda: (v := settled()) and b"before-4" in v and v, timeout=60, what="a readable log")
    finally:
        c.close()
        md.close()
    assert [b"before-%d" % i for i in range(5)] == values[:5]
    assert not any(v.startswith(b"zombie-") for v in values), values
