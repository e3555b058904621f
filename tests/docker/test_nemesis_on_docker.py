"""The nemesis on the Docker runtime: every fault package on the compose cluster (the chaos run: test_chaos_run_on_docker.py).

The nemesis only uses the runtime's verbs (info, kill, start, pause, resume,
cut, heal, wait_ready, node_state, bootstrap_all) and the brokers' fault
injection (lost ACK). Here each package starts and stops on the compose
cluster (started for clock faults, so the clock packages have libfaketime
preloaded: cluster.docker_clock; and on lazy disks where FUSE mounts, so the
disk packages' power losses hit real lazy filesystems, with the topic fsyncing
every message as flush.messages=1 does in Kafka) while an idempotent acks=all
producer keeps writing; then final_heal: every node running, no sidecar rule
left, the cluster serving, and no acknowledged record lost.
"""
from __future__ import annotations

import json
import random
import threading

import pytest

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster import docker_clock, faketime
from cluster import nemesis as nem
from cluster.history import History
from cluster.lazyfs import LazyFs
from cluster.nemesis_disk import DISK_PACKAGES
from tests import helpers as h
from tests.docker.conftest import open_cluster

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]
EXPECT_DEAD = {"kill": "broker", "kill-leader": "broker", "kill-controller": "controller",
               "kill-zookeeper": "zookeeper"}


class Writer(threading.Thread):
    """Sends numbered records in rounds of 100 until stopped; remembers which were acknowledged."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap, ProducerConfig.from_props({
            "acks": "all", "enable.idempotence": "true", "linger.ms": "5", "request.timeout.ms": "3000",
            "delivery.timeout.ms": "60000"}))
        self.topic, self.acked, self.sent, self.stop = topic, set(), 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            batch = {}
            for _ in range(100):
                batch[self.sent] = self.producer.send(self.topic, f"{self.sent}:".encode())
                self.sent += 1
            try:
                self.producer.flush()
            except Exception:  # noqa: BLE001 - a round may fail mid-fault; its unacked records just do not count
                pass
            self.acked |= {i for i, f in batch.items() if f.done() and f.exception() is None}

    def close(self):
        self.stop.set()
        self.join(120)
        self.producer.close()


@pytest.fixture(scope="module")
def nemesis_cluster(docker_engine):
    # without FUSE the disk packages cannot run anywhere; they are then left out (the test says so)
    rt = open_cluster(docker_engine, "nemesis-on-docker", disk=None if LazyFs.available() else "lazy")
    docker_clock.enable(rt)
    try:
        rt.up(timeout=240)
        yield rt
    finally:
        rt.down()


def read_ids(bootstrap: str, topic: str, partitions: int) -> set[int]:
    c = KafkaConsumer(bootstrap)
    try:
        return {int(r.value.split(b":", 1)[0]) for r in c.read_all([(topic, p) for p in range(partitions)],
                                                                   timeout=60)}
    finally:
        c.close()


def test_every_fault_package_runs_on_docker_and_heals(nemesis_cluster, tmp_path):
    rt = nemesis_cluster
    boot = rt.bootstrap_all()
    md = ClusterMetadata(boot)
    # fsynced appends: a power loss of every replica keeps what was acknowledged (Kafka's default flush would not)
    create_topic(md, "nemesis", 3, configs={"min.insync.replicas": "2", "flush.messages": "1"})
    history = History(str(tmp_path / "history.jsonl"))
    ctx = nem.Context(rt, history, "nemesis", 3, md, random.Random(7), transactional_ids=lambda: ["nemesis-tid"])
    writer = Writer(boot, "nemesis")
    writer.start()
    try:
        names = sorted(n for n, p in nem.PACKAGES.items() if "docker" in p.runtimes)
        if not rt.lazy_disks():
            names = [n for n in names if n not in DISK_PACKAGES]
            print(f"no lazy disks here ({LazyFs.available()}): the disk packages are left out")
        for name in names:
            pkg = nem.PACKAGES[name]
            started = pkg.start(ctx)
            if name in EXPECT_DEAD and started:
                assert rt.node_state(started) == "dead", (name, started)
                assert rt.info().node(started).role == EXPECT_DEAD[name]
            elif name == "pause" and started:
                assert rt.node_state(started) == "paused"
            elif name.startswith("partition"):
                assert any(rt.rules().values()), f"{name} left no rule in force: {started}"
            elif name == "lost-ack":
                assert started is None or started["node"].startswith("broker-"), started
            elif name == "delay-end-txn":     # the coordinator container serves the fault (and its secret)
                assert started and all(n.startswith("txn-coordinator-") for n in started["nodes"]), started
            elif name in DISK_PACKAGES:       # a power loss: every node it hit is down until the stop
                assert started and all(rt.node_state(n) == "dead" for n in started["nodes"]), started
                assert all(n.startswith("broker-") or (n == "zookeeper" and started["spread"] == "all")
                           for n in started["nodes"]), started       # a whole-cluster power loss: ZooKeeper too
            elif name.startswith("clock-"):      # the target's control file holds a non-zero offset
                assert started and started["node"] != "zookeeper", started
                h.wait_for(lambda: faketime.offset(rt, started["node"]) != 0, timeout=5, what=f"{name}'s offset")
            threading.Event().wait(2.0)
            pkg.stop(ctx, started)
            if name.startswith("partition"):
                assert not any(rt.rules().values())
            if name.startswith("clock-"):
                assert faketime.offset(rt, started["node"]) == 0
        nem.final_heal(ctx, timeout=120)
    finally:
        writer.close()
        md.close()
        history.close()
    assert {n.name: n.state for n in rt.info().nodes} == {n.name: "running" for n in rt.info().nodes}
    assert not any(rt.rules().values())
    assert len(writer.acked) > 100, "the producer hardly got anything through"
    lost = writer.acked - read_ids(boot, "nemesis", 3)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:10]}"
    ops = [json.loads(line) for line in open(tmp_path / "history.jsonl")]
    assert [o["f"] for o in ops][-1] == "heal" and all(o["process"] == "nemesis" for o in ops)
