"""Chaos suites of the queue workload: every fault package that makes sense without transaction
coordinators (all but kill-coordinator) against the safe configuration must come out valid.

The safe configuration: idempotent producer, acks=all, replication factor 3,
min.insync.replicas 2, clean leader election. `make test` runs one short
seed per package (marker integration); `make chaos` adds longer runs over
several seeds (marker slow). The verdict is the checker's (`eoslab check
--model kafka`), read from results.json. The transactional workloads' suites
are in test_workloads.py.
"""
import importlib.util
import json

import pytest

from cluster.run import RunConfig, run
from tests.chaos.runs import FAULTS, SAFE

PACKAGES = FAULTS["queue"]

needs_checker = pytest.mark.skipif(importlib.util.find_spec("checker.cli") is None,
                                   reason="the Kafka checker (eoslab check) is not in this build")


def _run(tmp_path, package, seed, time_limit):
    out = tmp_path / f"{package}-{seed}"
    cfg = RunConfig(workload="queue", nemesis=[package], time_limit=time_limit, seed=seed, out=str(out),
                    settings=dict(SAFE))
    code = run(cfg)
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    meta = json.loads((out / "run.json").read_text())
    return code, results, meta


@needs_checker
@pytest.mark.integration
@pytest.mark.parametrize("package", PACKAGES)
def test_short_run_is_valid(tmp_path, package, monkeypatch, eoslab_home):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    code, results, meta = _run(tmp_path, package, seed=1, time_limit=8)
    assert "error" not in meta, meta.get("error")
    assert meta["schedule"], "the nemesis scheduled no fault"
    assert results.get("valid") is True, results.get("anomalies")
    assert code == 0
    assert results["stats"]["records"]["acked"] > 0


@needs_checker
@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("package", PACKAGES)
def test_long_run_is_valid(tmp_path, package, seed, monkeypatch, eoslab_home):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    code, results, meta = _run(tmp_path, package, seed=seed, time_limit=40)
    assert "error" not in meta, meta.get("error")
    assert results.get("valid") is True, results.get("anomalies")
    assert code == 0
