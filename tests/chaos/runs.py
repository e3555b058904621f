"""Helpers of the chaos suites: which faults go with which workload, one run, its verdict."""
from __future__ import annotations

import json
import os

from cluster import nemesis as nem
from cluster.nemesis_clock import CLOCK_PACKAGES
from cluster.nemesis_disk import DISK_PACKAGES
from cluster.run import RunConfig, run

# The safe configuration: idempotent (transactional) producers with acks=all, replication factor 3,
# min.insync.replicas 2, clean leader election, read_committed consumers.
SAFE = {"acks": "all", "enable.idempotence": "true", "topic.min.insync.replicas": "2"}

# Faults where they make sense: kill-coordinator and delay-end-txn need coordinators and transactional
# ids (queue runs without them).
# The disk and clock packages need clusters started for them (a lazy filesystem, libfaketime), not the
# suites' shared cluster: their own tests run them (tests/cluster/test_disk_faults.py, test_clock_faults.py).
NETWORK_AND_PROCESS = sorted(set(nem.PACKAGES) - set(DISK_PACKAGES) - set(CLOCK_PACKAGES))
FAULTS = {
    "queue": sorted(set(NETWORK_AND_PROCESS) - {"kill-coordinator", "delay-end-txn"}),
    "txn": NETWORK_AND_PROCESS,
    "copier": NETWORK_AND_PROCESS,
    "zombie": ["kill", "kill-coordinator", "kill-leader", "loss", "lost-ack", "partition", "pause"],
    "pid": ["kill", "kill-controller", "kill-coordinator", "kill-zookeeper", "loss", "partition",
            "partition-zookeeper", "pause"],
}
TXN_CLUSTER = {"controller_args": ["--pid-block-size=20"], "txn_coordinators": 2}   # what `eoslab run` gives them


def run_once(out_dir, workload: str, packages: list[str], seed: int, time_limit: float, cluster: str | None = None,
             settings: dict | None = None):
    """One `eoslab run`; returns (exit code, results.json, run.json)."""
    out = os.path.join(str(out_dir), f"{workload}-{'+'.join(packages) or 'none'}-{seed}")
    s = dict(SAFE)
    s.update(settings or {})
    cfg = RunConfig(workload=workload, nemesis=packages or ["none"], time_limit=time_limit, seed=seed, out=out,
                    cluster=cluster, settings=s)
    code = run(cfg)
    path = os.path.join(out, "results.json")
    results = json.load(open(path)) if os.path.exists(path) else {}
    with open(os.path.join(out, "run.json")) as f:
        meta = json.load(f)
    return code, results, meta


def assert_valid(code, results, meta, what: str) -> None:
    assert "error" not in meta, f"{what}: {meta.get('error')}"
    assert not results.get("lab_errors"), f"{what}: lab errors, not a verdict about Kafka: " + "; ".join(
        f"{e.get('kind')} {e.get('node') or e.get('thread') or ''}: {e.get('message')}" for e in results["lab_errors"])
    assert results.get("valid") is True, f"{what}: {results.get('anomalies')}"
    assert code == 0, what
    assert results["stats"]["by_type"]["ok"] > 0, f"{what}: no op succeeded"
