"""The clock faults on the Docker runtime (cluster.docker_clock): real containers, the image's real libfaketime.

A compose cluster started for clock faults runs its controllers, brokers and
coordinators with the preload and their own control file, ZooKeeper and the
sidecars without; a clock-jump moves the wall clock inside the target's
container only (read by a `docker exec` Python, which runs under the
container's preload, and by the coordinator itself: the start time it records
for a transaction, and the open transaction it aborts as timed out), never the
monotonic clock, and its stop puts the clock back. An image without
libfaketime is refused in one line before anything starts, and
`eoslab run --runtime docker` with a clock-jump starts its cluster with the
preload and records the jump in its history as on the local runtime.
"""
from __future__ import annotations

import json
import random
import time
import uuid

import pytest

from cluster import docker_clock, faketime
from cluster.nemesis import Context
from cluster.nemesis_clock import ClockJump
from tests import helpers as h
from tests.cluster.test_clock_faults import _describe, _open_transaction
from tests.docker.conftest import SESSION_TIMEOUT_MS, eoslab, open_cluster

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

CLOCK = "import time; print(time.time(), time.monotonic())"
JUMP_S = 3600


@pytest.fixture(scope="module")
def clock_cluster(docker_engine):
    rt = open_cluster(docker_engine, "clock", brokers=1, controllers=1, txn_coordinators=1)
    docker_clock.enable(rt)
    try:
        rt.up(timeout=240)
        yield rt
    finally:
        rt.down()


def _container_clock(rt, node: str) -> tuple[float, float, float]:
    """(the container's wall clock minus ours, its monotonic reading, how long the exec took): a Python
    started by `docker exec` in NODE's container, which runs with the container's environment."""
    before_mono, before = time.monotonic(), time.time()
    code, out = rt.container(node).exec_run(["python", "-c", CLOCK])
    after, after_mono = time.time(), time.monotonic()
    assert code == 0, out
    wall, mono = map(float, out.split())
    assert before_mono - 0.05 <= mono <= after_mono + 0.05, "the monotonic clock moved"
    return wall - (before + after) / 2, mono, after - before


def _offset_is(rt, node: str, expected: float) -> bool:
    off, _, took = _container_clock(rt, node)
    return abs(off - expected) < 2.0 + took / 2


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _service_environ(rt, node: str) -> dict[str, str]:
    """The environment of the service process itself (read from the host's /proc)."""
    top = rt.container(node).top()
    pid_col = top["Titles"].index("PID")
    # the command line from /proc, not top's CMD column: `ps` cuts that to the width dockerd's environment
    # gives it (32 characters when dockerd has no COLUMNS, too short for the launcher's path)
    pids = [p[pid_col] for p in top["Processes"] if b"eoslab-launch" in _cmdline(p[pid_col])]
    assert pids, top
    with open(f"/proc/{pids[0]}/environ", "rb") as f:
        return dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def _container_env(rt, service: str) -> list[str]:
    c = rt.container(service)
    c.reload()
    return c.attrs["Config"]["Env"] or []


def test_a_clock_jump_moves_only_the_target_service_wall_clock_inside_its_container(clock_cluster):
    from clients.metadata import ClusterMetadata
    rt = clock_cluster
    for node in ("controller-1", "broker-1", "txn-coordinator-1"):     # the services themselves: preloaded
        env = _service_environ(rt, node)
        assert env["FAKETIME_TIMESTAMP_FILE"] == f"{docker_clock.CONTAINER_DIR}/{node}.rc", env
        assert "libfaketimeMT.so.1" in env["LD_PRELOAD"] and faketime.sleep_fix_name() in env["LD_PRELOAD"]
        assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    for other in ("zookeeper", "broker-1-sidecar", "broker-1-net"):    # never ZooKeeper, sidecars or holders
        assert not any(e.startswith(("LD_PRELOAD=", "FAKETIME")) for e in _container_env(rt, other)), other
    assert faketime.enabled(rt)

    boot = rt.bootstrap_all()
    topic = f"clock-{uuid.uuid4().hex[:6]}"
    h.new_topic(boot, topic)
    md = ClusterMetadata(boot)
    tid = f"clock-{uuid.uuid4().hex[:8]}"
    victim = _open_transaction(boot, tid, topic)             # 60 s timeout, begun on the real clock
    try:
        coordinator = "txn-coordinator-1"
        epoch = _describe(rt, coordinator, tid).producer_epoch
        for node in ("broker-1", coordinator):
            assert _offset_is(rt, node, 0)
        ctx = Context(rt, None, topic, 1, md, random.Random(7), transactional_ids=lambda: [tid])
        pkg = ClockJump(min_s=JUMP_S, max_s=JUMP_S, back_share=0)
        started = pkg.start(ctx)
        try:
            assert started == {"node": coordinator, "offset_s": JUMP_S}
            assert faketime.offset(rt, coordinator) == JUMP_S
            h.wait_for(lambda: _offset_is(rt, coordinator, JUMP_S), timeout=15,
                       what=f"the wall clock in {coordinator}'s container an hour ahead")
            assert _offset_is(rt, "broker-1", 0) and _offset_is(rt, "controller-1", 0)   # only the target's
            # the coordinator's own clock: the open transaction is now "an hour old", past its 60 s timeout
            h.wait_for(lambda: _describe(rt, coordinator, tid).state in ("PrepareAbort", "CompleteAbort"),
                       timeout=60, what=f"{coordinator} aborting {tid} as timed out on its jumped clock")
            assert _describe(rt, coordinator, tid).producer_epoch > epoch          # fenced
            fresh = f"clock-{uuid.uuid4().hex[:8]}"
            p = _open_transaction(boot, fresh, topic)       # begun now: stamped with the coordinator's clock
            try:
                start_ms = _describe(rt, coordinator, fresh).transaction_start_time_ms
                assert abs(start_ms / 1000 - time.time() - JUMP_S) < 30, start_ms
            finally:
                p.close(5)
        finally:
            stopped = pkg.stop(ctx, started)
        assert stopped == {"node": coordinator, "offset_s": JUMP_S, "restored_s": 0}
        assert faketime.offset(rt, coordinator) == 0
        h.wait_for(lambda: _offset_is(rt, coordinator, 0), timeout=15, what=f"{coordinator}'s clock back")
    finally:
        victim.close(5)
        md.close()
    assert {n.name: n.state for n in rt.info().nodes} == {n.name: "running" for n in rt.info().nodes}


def test_a_run_on_docker_with_a_clock_fault_is_refused_in_one_line_when_the_image_has_no_libfaketime(
        docker_engine, tmp_path):
    import os
    env = dict(os.environ, EOSLAB_IMAGE="eoslab/zookeeper:dev")      # a real image without the preload
    r = eoslab("run", "--runtime", "docker", "--workload", "txn", "--nemesis", "clock-jump", "--time-limit", "10",
               "--seed", "1", "--out", str(tmp_path / "run"), env=env)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    line = [ln for ln in r.stderr.splitlines() if "clock-jump" in ln]
    assert len(line) == 1 and "libfaketime" in line[0] and "eoslab/zookeeper:dev" in line[0], r.stderr
    assert not (tmp_path / "run" / "history.jsonl").exists()                 # nothing ran


def test_a_run_on_docker_with_a_clock_jump_records_it_in_its_history(docker_engine, tmp_path):
    import os
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps([{"at": 4, "package": "clock-jump", "duration": 8}]))
    env = dict(os.environ, EOSLAB_IMAGE=docker_engine, EOSLAB_ZK_SESSION_TIMEOUT_MS=str(SESSION_TIMEOUT_MS))
    out = tmp_path / "run"
    r = eoslab("run", "--runtime", "docker", "--workload", "txn", "--schedule", str(schedule), "--time-limit", "20",
               "--seed", "3", "--out", str(out), timeout=900, env=env)
    meta = json.loads((out / "run.json").read_text())
    assert meta["runtime_used"] == "docker" and "error" not in meta, (meta, r.stderr[-3000:])
    ops = [json.loads(line) for line in open(out / "history.jsonl")]
    starts = [o for o in ops if o["f"] == "start-clock-jump"]      # an info pair each, as Jepsen records faults
    stops = [o for o in ops if o["f"] == "stop-clock-jump"]
    assert len(starts) == 2 and len(stops) == 2, [o for o in ops if o["process"] == "nemesis"]
    jump = starts[1]["value"]          # None when the package refused to start (no preload)
    assert jump and jump["node"].startswith("txn-coordinator-") and 30 <= abs(jump["offset_s"]) <= 600, jump
    assert stops[1]["value"] == {**jump, "restored_s": 0}
    assert [w["package"] for w in meta["fault_windows"] if w["package"] == "clock-jump"] == ["clock-jump"]
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["valid"] is True
