"""A chaos run on Docker: `eoslab run --runtime docker --workload queue --nemesis kill`, checked valid.

Its own module, so no other test cluster runs beside the one `eoslab run`
starts (two clusters at once on two cores is a load test, not this test).
The run uses this session's image (EOSLAB_IMAGE) and the test clusters'
ZooKeeper session timeout (EOSLAB_ZK_SESSION_TIMEOUT_MS), starts and stops its own
compose project, and must end with the checker's verdict: valid.
"""
from __future__ import annotations

import json
import os

import pytest

from tests.docker.conftest import ROOT, SESSION_TIMEOUT_MS, eoslab

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]


def test_a_chaos_run_on_docker_is_valid(docker_engine, tmp_path):
    with open(os.path.join(ROOT, "cluster", "run.py")) as f:
        if "open_runtime" not in f.read():
            pytest.skip("cluster/run.py does not open its runtime through cluster.runtimes.open_runtime yet, "
                        "so `eoslab run --runtime docker` is not wired")
    env = dict(os.environ, EOSLAB_IMAGE=docker_engine, EOSLAB_ZK_SESSION_TIMEOUT_MS=str(SESSION_TIMEOUT_MS))
    out = tmp_path / "run"
    r = eoslab("run", "--runtime", "docker", "--workload", "queue", "--nemesis", "kill", "--time-limit", "20",
               "--seed", "3", "--set", "topic.min.insync.replicas=2", "--out", str(out), timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "run.json").read_text())
    assert meta["runtime"] == "docker" and "error" not in meta, meta
    ops = [json.loads(line) for line in open(out / "history.jsonl")]
    assert any(o["f"] == "start-kill" for o in ops) and sum(o["type"] == "ok" for o in ops) > 50
    assert json.loads((out / "results.json").read_text())["valid"] is True
