"""The compose cluster for the container tests: engine, images and Compose made sure of, then one cluster per module.

Skips (with the reason) only when no Docker engine can run at all: the
engine script installs and starts one when it can. Missing images are built
with `make -f mk/docker.mk images` (air-gapped from the wheelhouse). The
test cluster is its own compose project on its own subnet and bootstrap
port, so it never touches a cluster someone started with `make cluster-up`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT, NET, BOOTSTRAP_PORT = "eoslab-test", "172.28.78", 19192


def _make(target: str, timeout: float) -> None:
    r = subprocess.run(["make", "--no-print-directory", "-f", "mk/docker.mk", target, f"BIN={os.path.dirname(sys.executable)}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"make {target} failed: {r.stderr.strip()[-1500:]}")


@pytest.fixture(scope="session")
def docker_engine():
    r = subprocess.run(["bash", os.path.join(ROOT, ".ci", "docker-engine.sh")], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        pytest.skip(f"no Docker engine can run here: {r.stderr.strip()}")
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install docker)")
    _make("compose", 300)
    _make("images", 1800)


@pytest.fixture(scope="module")
def docker_cluster(docker_engine):
    from cluster.docker_runtime import DockerRuntime
    rt = DockerRuntime(project=PROJECT, net=NET, bootstrap_port=BOOTSTRAP_PORT)
    rt.down()
    rt.up(timeout=180)
    yield rt
    rt.down()


def eoslab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def produce(bootstrap: str, topic: str, count: int, *extra: str, timeout: float = 180) -> dict:
    r = eoslab("produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count), "--acks", "all",
               "--idempotent", "--partitions", "3", *extra, timeout=timeout)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def consume_ids(bootstrap: str, topic: str) -> list[int]:
    r = eoslab("consume", "--bootstrap", bootstrap, "--topic", topic, "--json", "--timeout", "20")
    assert r.returncode == 0, r.stderr
    return [int(json.loads(ln)["value"].split(":", 1)[0]) for ln in r.stdout.splitlines() if ln.strip()]


def wait_healthy(rt, node: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = rt.container(node)
        c.reload()
        if c.attrs["State"].get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(0.5)
    raise AssertionError(f"{node} not healthy after {timeout}s: {rt.logs(node, 20)}")
