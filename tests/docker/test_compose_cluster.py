"""The compose cluster end to end: healthy from images, produce and consume, kill, pause, partition and heal.

"No acknowledged record lost" is checked from what the producer CLI
reports: when every record was acknowledged, every record index must be read
back; otherwise at least as many distinct indices as acknowledgements.
Transactions go through the compose cluster's coordinators, also across the
loss of the one that owns the transactional.id.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time

import grpc
import pytest

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from eoslab.v1 import broker_pb2
from services.probe import probe
from tests.docker.conftest import ROOT, consume_ids, produce, wait_healthy

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]


def assert_no_acked_record_lost(summary: dict, ids: list[int]) -> None:
    got = set(ids)
    if summary["acked"] == summary["sent"]:
        missing = set(range(summary["sent"])) - got
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:10]}"
    else:
        assert len(got) >= summary["acked"], (len(got), summary)


def test_every_service_is_healthy_and_records_go_through(docker_cluster):
    info = docker_cluster.info()
    assert {n.name: n.state for n in info.nodes} == {n.name: "running" for n in info.nodes}
    assert [n.name for n in info.by_role("txn-coordinator")] == ["txn-coordinator-1", "txn-coordinator-2"]
    for svc in docker_cluster._containers():      # Docker's healthchecks agree (they run every 2-5 s)
        if not svc.endswith("-net"):
            wait_healthy(docker_cluster, svc)
    for n in info.by_role("broker"):
        assert probe("broker", n.address)
    for n in info.by_role("controller"):
        assert probe("controller", n.address)
    summary = produce(info.bootstrap, "smoke", 2000)
    assert summary["acked"] == 2000 and not summary["errors"], summary
    ids = consume_ids(info.bootstrap, "smoke")
    assert sorted(ids) == list(range(2000))


def test_a_killed_broker_loses_no_acknowledged_record(docker_cluster):
    rt = docker_cluster
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(produce(rt.bootstrap_all(), "kill", 60000)))
    t.start()
    time.sleep(1.0)
    rt.kill("broker-2")
    assert rt.node_state("broker-2") == "dead"
    t.join(240)
    rt.start("broker-2")
    rt.wait_ready(60)
    assert result, "the producer did not finish"
    assert_no_acked_record_lost(result, consume_ids(rt.bootstrap_all(), "kill"))


def test_a_broker_cut_off_by_its_sidecar_loses_nothing_and_recovers_after_heal(docker_cluster):
    rt = docker_cluster
    others = ["zookeeper", "controller-1", "controller-2", "broker-1", "broker-2", "txn-coordinator-1",
              "txn-coordinator-2"]
    first = produce(rt.bootstrap_all(), "cut", 3000)
    rt.partition([["broker-3"], others])
    rules = rt.rules()
    assert any("broker-1" in d for d in rules["broker-3"]) and any("broker-3" in d for d in rules["broker-1"])
    during = produce(",".join(f"{rt.host(b)}:9092" for b in ("broker-1", "broker-2")), "cut-during", 3000,
                     timeout=240)
    rt.heal()
    assert all(v == [] for v in rt.rules().values())
    rt.wait_ready(60)
    after = produce(rt.bootstrap_all(), "cut-after", 1000)
    assert after["acked"] == 1000, after
    assert_no_acked_record_lost(first, consume_ids(rt.bootstrap_all(), "cut"))
    assert_no_acked_record_lost(during, consume_ids(rt.bootstrap_all(), "cut-during"))


def test_pause_freezes_a_broker_and_resume_thaws_it(docker_cluster):
    rt = docker_cluster
    addr = f"{rt.host('broker-1')}:9092"
    rt.pause("broker-1")
    try:
        assert rt.node_state("broker-1") == "paused"
        assert not probe("broker", addr, timeout=1.0)
    finally:
        rt.resume("broker-1")
    assert rt.node_state("broker-1") == "running"
    deadline = time.monotonic() + 30
    while not probe("broker", addr):
        assert time.monotonic() < deadline, "broker-1 did not answer after resume"
        time.sleep(0.5)


def test_the_sidecar_in_the_cluster_refuses_without_token_and_nonsense(docker_cluster):
    from services.sidecar.client import SidecarClient, SidecarError
    rt = docker_cluster
    with SidecarClient(f"{rt.host('broker-1')}:9191", "not-the-token") as c:
        with pytest.raises(SidecarError) as e:
            c.partition(["broker-2"])
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    side = rt.sidecar("broker-1")
    for call, text in ((lambda: side.partition(["broker-9"]), "unknown peer 'broker-9'"),
                       (lambda: side.bandwidth(-1, ["broker-2"]), "rate_bits_per_second")):
        with pytest.raises(SidecarError) as e:
            call()
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and text in e.value.message
    assert list(side.rules().rules) == []


def _committed(boot: str, topic: str, partitions: int) -> list[bytes]:
    c, u = KafkaConsumer(boot, isolation_level="read_committed"), KafkaConsumer(boot)
    try:
        deadline = time.monotonic() + 60
        tps = [(topic, p) for p in range(partitions)]
        while c.end_offsets(tps) != u.end_offsets(tps):      # markers still being written
            assert time.monotonic() < deadline, "the last stable offset did not catch up"
            time.sleep(0.2)
        return [r.value for r in c.read_all(tps, timeout=60)]
    finally:
        c.close()
        u.close()


def _coordinator(rt, boot: str, tid: str) -> str:
    md = ClusterMetadata(boot)
    try:
        for _ in range(200):
            r = md.stub(md.any_broker()).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                key_type=broker_pb2.TRANSACTION, key=tid), timeout=5)
            if r.error == 0:
                assert r.host == rt.host(f"txn-coordinator-{r.node_id}"), (r.host, r.node_id)
                return f"txn-coordinator-{r.node_id}"
            time.sleep(0.1)
    finally:
        md.close()
    raise AssertionError(f"no coordinator for {tid}")


def test_transactions_commit_and_abort_through_the_coordinators_and_survive_losing_one(docker_cluster):
    rt = docker_cluster
    boot = rt.bootstrap_all()
    md = ClusterMetadata(boot)
    try:
        create_topic(md, "txn", 3)
    finally:
        md.close()
    p = KafkaProducer(boot, ProducerConfig(transactional_id="docker-txn", request_timeout_ms=3000, linger_ms=0))
    try:
        p.init_transactions()
        owner = _coordinator(rt, boot, "docker-txn")
        p.begin_transaction()
        for i in range(30):
            p.send("txn", f"a{i}".encode(), partition=i % 3)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(30):
            p.send("txn", f"b{i}".encode(), partition=i % 3)
        p.abort_transaction()
        rt.kill(owner)                        # the other coordinator takes the transactional.id over
        p.begin_transaction()
        for i in range(30):
            p.send("txn", f"c{i}".encode(), partition=i % 3)
        p.commit_transaction()
        assert rt.node_state(owner) == "dead" and _coordinator(rt, boot, "docker-txn") != owner
    finally:
        p.close()
        rt.start(owner)
    got = _committed(boot, "txn", 3)
    assert sorted(got) == sorted([f"a{i}".encode() for i in range(30)] + [f"c{i}".encode() for i in range(30)])
    rt.wait_ready(60)


@pytest.mark.slow
def test_the_image_builds_from_nothing_without_network(docker_engine):
    """`docker build --no-cache --network none` on the Debian-made base: the wheelhouse is all pip gets
    (CLOCK_FAULTS=0: nothing from Debian's mirror, so no sleep fix, and the clock faults refuse the image)."""
    tag = f"eoslab/eoslab:airgap-{os.getpid()}"
    r = subprocess.run(["/usr/bin/docker", "build", "-q", "--no-cache", "--network", "none",
                        "--build-arg", "BASE_IMAGE=eoslab/base:bookworm", "--build-arg", "PIP_OFFLINE=1",
                        "--build-arg", "CLOCK_FAULTS=0",
                        "-t", tag, "."], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["/usr/bin/docker", "run", "--rm", "--network", "none", tag, "python", "-c",
                        "import services.broker, services.txn_coordinator, services.sidecar, grpc, kazoo; print('ok')"],
                       capture_output=True, text=True, timeout=120)
    refused = _clock_refusal(tag)      # CLOCK_FAULTS=0: no sleep fix, so no clock faults
    subprocess.run(["/usr/bin/docker", "rmi", tag], capture_output=True)
    assert r.stdout.strip() == "ok", r.stderr
    assert refused and "\n" not in refused and tag in refused, refused


def _clock_refusal(image: str) -> str | None:
    """Why the clock faults cannot run on this image (cluster.docker_clock.check_image), or None."""
    import docker

    from cluster import docker_clock, faketime
    from cluster.docker_engine import SOCKET
    client = docker.DockerClient(base_url=f"unix://{SOCKET}", version="auto", timeout=60)
    try:
        docker_clock.check_image(client, image)
    except faketime.FaketimeMissing as e:
        return str(e)
    finally:
        client.close()
    return None
