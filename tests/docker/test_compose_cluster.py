"""The compose cluster end to end: healthy from images, produce and consume, kill, pause, partition and heal.

"No acknowledged record lost" is checked from what the producer CLI
reports: when every record was acknowledged, every record index must be read
back; otherwise at least as many distinct indices as acknowledgements.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import grpc
import pytest

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
    wait_healthy(rt, "broker-2")
    assert result, "the producer did not finish"
    assert_no_acked_record_lost(result, consume_ids(rt.bootstrap_all(), "kill"))


def test_a_broker_cut_off_by_its_sidecar_loses_nothing_and_recovers_after_heal(docker_cluster):
    rt = docker_cluster
    others = ["zookeeper", "controller-1", "controller-2", "broker-1", "broker-2"]
    first = produce(rt.bootstrap_all(), "cut", 3000)
    rt.partition([["broker-3"], others])
    rules = rt.rules()
    assert any("broker-1" in d for d in rules["broker-3"]) and any("broker-3" in d for d in rules["broker-1"])
    during = produce(",".join(f"{rt.host(b)}:9092" for b in ("broker-1", "broker-2")), "cut-during", 3000,
                     timeout=240)
    rt.heal()
    assert all(v == [] for v in rt.rules().values())
    wait_healthy(rt, "broker-3")
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


@pytest.mark.slow
def test_the_image_builds_from_nothing_without_network(docker_engine):
    """`docker build --no-cache --network none` on the Debian-made base: the wheelhouse is all pip gets."""
    r = subprocess.run(["/usr/bin/docker", "build", "-q", "--no-cache", "--network", "none",
                        "--build-arg", "BASE_IMAGE=eoslab/base:bookworm", "--build-arg", "PIP_OFFLINE=1",
                        "-t", "eoslab/eoslab:airgap-test", "."], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["/usr/bin/docker", "run", "--rm", "eoslab/eoslab:airgap-test", "python", "-c",
                        "import services.broker, services.sidecar, grpc, kazoo; print('ok')"],
                       capture_output=True, text=True, timeout=120)
    subprocess.run(["/usr/bin/docker", "rmi", "eoslab/eoslab:airgap-test"], capture_output=True)
    assert r.stdout.strip() == "ok", r.stderr
