"""The compose cluster for the container tests: engine, images and Compose made sure of, then one cluster per module.

Skips (with the reason) only when no Docker engine can run at all: the
engine script installs and starts one when it can (tried three times: the
engine may be restarting). Images are built for this test session under
its own tag (eoslab/eoslab:test-<pid>, from this checkout, with the layer
cache; removed at the end), so another checkout building eoslab/eoslab:dev
at the same time (CI's clean clone, a developer) cannot swap the code under
these tests. Each test cluster is its own compose project (eoslab-t<pid>-…)
with a subnet and bootstrap port nobody else uses, so it never touches a
cluster someone started with `make cluster-up` or another test run. Test
clusters use a 6 s ZooKeeper session timeout instead of the lab's 2 s: this
machine is shared, and at a load of 50 on two cores a 2 s session can
expire while a service starts, which makes it exit (a failover then takes
about 6 s, which no test here depends on).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKER = "/usr/bin/docker"
TEST_IMAGE = f"eoslab/eoslab:test-{os.getpid()}"
SETUP_TIMES: dict[str, float] = {}       # step -> seconds, shown at the end of the run
PROJECT_PREFIX = f"eoslab-t{os.getpid()}"
SESSION_TIMEOUT_MS = 6000


def _make(target: str, timeout: float, **variables: str) -> None:
    t0 = time.monotonic()
    r = subprocess.run(["make", "--no-print-directory", "-f", "mk/docker.mk", target,
                        f"BIN={os.path.dirname(sys.executable)}", *(f"{k}={v}" for k, v in variables.items())],
                       cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    SETUP_TIMES[f"make {target}"] = time.monotonic() - t0
    if r.returncode != 0:
        raise AssertionError(f"make {target} failed: {r.stderr.strip()[-1500:]}")


def _engine() -> str | None:
    """None when an engine runs (started if needed), else why not."""
    why = ""
    for attempt in range(3):
        r = subprocess.run(["bash", os.path.join(ROOT, ".ci", "docker-engine.sh")], capture_output=True, text=True,
                           timeout=900)
        if r.returncode == 0:
            return None
        why = r.stderr.strip() or r.stdout.strip()
        if "needs root" in why or "failed (is Debian" in why or "install docker.io failed" in why:
            break                                   # no engine can run here: no point trying again
        time.sleep(5 * (attempt + 1))
    return why


def _drop_stale_test_tags() -> None:
    """Tags of earlier sessions whose process is gone (a killed run cannot remove its own)."""
    r = subprocess.run([DOCKER, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "eoslab/eoslab"],
                       capture_output=True, text=True, timeout=60)
    for tag in r.stdout.split():
        pid = tag.rpartition(":test-")[2]
        if ":test-" in tag and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            subprocess.run([DOCKER, "rmi", tag], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def docker_engine():
    t0 = time.monotonic()
    why = _engine()
    SETUP_TIMES["docker engine"] = time.monotonic() - t0
    if why is not None:
        pytest.skip(f"no Docker engine can run here: {why}")
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install -e '.[docker]')")
    from cluster.docker_engine import wait_engine
    wait_engine(120)
    _drop_stale_test_tags()
    _make("compose", 300)
    _make("images", 1800, EOSLAB_IMAGE=TEST_IMAGE)
    yield TEST_IMAGE
    subprocess.run([DOCKER, "rmi", TEST_IMAGE], capture_output=True, timeout=120)   # untags; layers stay cached


def pytest_terminal_summary(terminalreporter):
    if SETUP_TIMES:
        terminalreporter.write_line("container test setup: " + ", ".join(f"{k} {v:.1f} s"
                                                                        for k, v in SETUP_TIMES.items()))


def open_cluster(image: str, suffix: str, **kw):
    from cluster.docker_runtime import DockerRuntime
    return DockerRuntime(project=f"{PROJECT_PREFIX}-{suffix}", eoslab_image=image, engine_wait=120,
                         session_timeout_ms=SESSION_TIMEOUT_MS, **kw)


@pytest.fixture(scope="module")
def docker_cluster(docker_engine, request):
    rt = open_cluster(docker_engine, request.module.__name__.rpartition(".")[2].replace("test_", "")[:20]
                      .replace("_", "-"))
    t0 = time.monotonic()
    rt.up(timeout=240)
    SETUP_TIMES[f"up {rt.project}"] = time.monotonic() - t0
    yield rt
    rt.down()


def eoslab(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def produce(bootstrap: str, topic: str, count: int, *extra: str, timeout: float = 180) -> dict:
    r = eoslab("produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count), "--acks", "all",
               "--idempotent", "--partitions", "3", *extra, timeout=timeout)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def consume_ids(bootstrap: str, topic: str) -> list[int]:
    r = eoslab("consume", "--bootstrap", bootstrap, "--topic", topic, "--json", "--timeout", "20")
    assert r.returncode == 0, r.stderr
    return [int(json.loads(ln)["value"].split(":", 1)[0]) for ln in r.stdout.splitlines() if ln.strip()]


def wait_healthy(rt, service: str, timeout: float = 60) -> None:
    """Until Docker's healthcheck of that container says healthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = rt.container(service)
        c.reload()
        if c.attrs["State"].get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(0.5)
    raise AssertionError(f"{service} not healthy after {timeout}s: {c.attrs['State'].get('Health')}")
