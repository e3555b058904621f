"""Chaos suites of the transactional workloads (txn, copier, zombie, pid), on one cluster per module.

Short set (marker integration, `make test`): a few faults per workload, a few
seconds each, all valid under the safe configuration; and per workload the
checker catching a real anomaly once a safety is switched off:
- txn at read_uncommitted: the records of aborted transactions are read (G1a);
- copier with the input offsets committed by the consumer after the output
  transaction (at-least-once) and the copier killed between the two: the
  replacement copies again (duplicate);
- zombie at read_uncommitted: the fenced zombie's aborted records are read
  (G1a); at read_committed the same schedule is valid;
- pid with ZooKeeper losing its data (no durable storage) and the cluster
  restarted: the controller hands out the first id block again (pid-reuse).
Plus a regression test for a bug the pid workload found: a transaction
coordinator cut from ZooKeeper kept serving ids it no longer owned, and a new
owner could load __transaction_state before the old owner's last writes.
Long set (marker slow, `make chaos`): every fault where it makes sense x 3
seeds x 30 s, and all of a workload's faults combined, Jepsen style.
The verdict is always the checker's (`eoslab check --model kafka`).
"""
import json
import os
import random
import shutil
import time
import uuid

import pytest

from clients.metadata import ClusterMetadata
from cluster import nemesis as nem
from cluster.history import History
from cluster.local import LocalRuntime
from cluster.run import check
from cluster.workloads.pid import PidWorkload
from tests.chaos.runs import FAULTS, TXN_CLUSTER, assert_valid, run_once

CLUSTER_ARGS = TXN_CLUSTER
SHORT = {
    "txn": ["kill-coordinator", "loss"],
    "copier": ["kill-coordinator", "kill-leader"],
    "zombie": ["kill-coordinator", "loss"],
    "pid": ["kill-controller", "partition-zookeeper"],
}


@pytest.mark.integration
@pytest.mark.parametrize("workload", sorted(SHORT))
def test_short_runs_are_valid(shared, tmp_path, workload):
    for i, package in enumerate(SHORT[workload]):
        code, results, meta = run_once(tmp_path, workload, [package], seed=i + 1, time_limit=6,
                                       cluster=shared.cluster_name)
        assert_valid(code, results, meta, f"{workload} x {package}")
        assert meta["schedule"], "the nemesis scheduled no fault"


@pytest.mark.integration
def test_txn_at_read_uncommitted_reads_aborted_records(shared, tmp_path):
    code, results, meta = run_once(tmp_path, "txn", [], seed=3, time_limit=4, cluster=shared.cluster_name,
                                   settings={"isolation.level": "read_uncommitted", "workload.abort-ratio": "0.3"})
    assert "error" not in meta, meta.get("error")
    assert code == 1 and results["valid"] is False
    assert set(results["anomalies"]) == {"G1a"}, results["anomalies"]
    w = results["anomalies"]["G1a"][0]
    ops = {o["index"]: o for o in map(json.loads, open(os.path.join(tmp_path, "txn-none-3", "history.jsonl")))}
    assert ops[w["writer"]]["type"] == "fail" and ops[w["writer"]]["error"] == "aborted-by-client"
    assert ops[w["reader"]]["isolation"] == "read_uncommitted"


@pytest.mark.integration
def test_copier_with_offsets_outside_the_transaction_duplicates(shared, tmp_path):
    unsafe = {"workload.offsets": "consumer", "workload.crash-point": "after-commit", "workload.crash-interval": "1.5"}
    code, results, meta = run_once(tmp_path, "copier", [], seed=4, time_limit=5, cluster=shared.cluster_name,
                                   settings=unsafe)
    assert "error" not in meta, meta.get("error")
    assert meta["copier_crashes"], "the workload killed no copier"
    assert code == 1 and "duplicate" in results["anomalies"], results["anomalies"]
    assert all(w["key"].startswith("out-") for w in results["anomalies"]["duplicate"])
    safe = dict(unsafe, **{"workload.offsets": "transaction"})
    code, results, meta = run_once(tmp_path / "safe", "copier", [], seed=4, time_limit=5,
                                   cluster=shared.cluster_name, settings=safe)
    assert meta["copier_crashes"]
    assert_valid(code, results, meta, "the same crashes with the offsets in the transaction")


@pytest.mark.integration
def test_zombie_writes_are_hidden_only_at_read_committed(shared, tmp_path):
    pause = {"workload.cutoff": "pause", "workload.slots": "1"}
    code, results, meta = run_once(tmp_path, "zombie", [], seed=5, time_limit=7, cluster=shared.cluster_name,
                                   settings=dict(pause, **{"isolation.level": "read_uncommitted"}))
    assert "error" not in meta, meta.get("error")
    assert any(r["fenced"] for r in meta["zombie_rounds"]), meta["zombie_rounds"]
    assert code == 1 and set(results["anomalies"]) == {"G1a"}, results["anomalies"]
    assert "PRODUCER_FENCED" in results["stats"]["errors"]
    code, results, meta = run_once(tmp_path / "rc", "zombie", [], seed=5, time_limit=7,
                                   cluster=shared.cluster_name, settings=pause)
    assert any(r["fenced"] for r in meta["zombie_rounds"])
    assert_valid(code, results, meta, "zombie at read_committed")


def _allocate(rt, history, topic, seconds):
    wl = PidWorkload(rt.bootstrap_all(), history, 1, topic=topic, concurrency=2,
                     options={"broker-ratio": "1.0", "coordinator-ratio": "0"})
    wl.start()
    time.sleep(seconds)
    wl.halt()


@pytest.mark.integration
def test_pid_reuse_when_zookeeper_loses_its_data(make_cluster, tmp_path):
    rt = make_cluster(controller_args=["--pid-block-size=20"], txn_coordinators=0)
    out = tmp_path / "pid-wipe"
    out.mkdir()
    history = History(str(out / "history.jsonl"))
    _allocate(rt, history, "before", 2)
    nodes = [n.name for n in rt.info().nodes]
    for n in nodes:
        rt.kill(n)
    shutil.rmtree(os.path.join(rt.dir, "zookeeper", "data"))        # ZooKeeper without durable storage
    os.makedirs(os.path.join(rt.dir, "zookeeper", "data"))
    for n in ["zookeeper"] + [n for n in nodes if n != "zookeeper"]:
        rt.start(n)
    rt.wait_ready(60)
    _allocate(rt, history, "after", 2)
    history.close()
    assert check(str(out))[0] == 1
    results = json.loads((out / "results.json").read_text())
    assert set(results["anomalies"]) == {"pid-reuse"}, results["anomalies"]
    w = results["anomalies"]["pid-reuse"][0]
    assert [s["session"].split(":")[0] for s in w["sessions"]] == ["before", "after"]


@pytest.mark.integration
def test_coordinator_cut_from_zookeeper_hands_out_no_older_epoch(shared, tmp_path):
    """Regression (found by the pid workload under partition-zookeeper): a transaction coordinator cut
    from ZooKeeper went on serving the ids the controller had moved to the other coordinator, so two
    owners handed out diverging epochs for one transactional.id (pid-reuse: epochs going backwards).
    Fixed by fencing handovers in __transaction_state (services/txn_coordinator)."""
    rt = LocalRuntime.load(shared.cluster_name)
    out = tmp_path / "cut"
    out.mkdir()
    history = History(str(out / "history.jsonl"))
    wl = PidWorkload(rt.bootstrap_all(), history, 7, topic=f"cut-{uuid.uuid4().hex[:6]}", concurrency=3,
                     options={"broker-ratio": "0", "coordinator-ratio": "1.0"})
    wl.setup()
    md = ClusterMetadata(rt.bootstrap_all())
    ctx = nem.Context(rt, history, wl.topic, 3, md, random.Random(7), transactional_ids=wl.transactional_ids)
    wl.start()
    try:
        time.sleep(1)
        for tid in wl.transactional_ids()[:2]:
            owner = ctx.coordinator_of(tid)
            assert owner, f"no coordinator for {tid}"
            history.nemesis("start-partition-zookeeper", None, owner)
            rt.cut([(owner, "zookeeper")])
            time.sleep(5)
            rt.heal()
            history.nemesis("stop-partition-zookeeper", None, owner)
            time.sleep(2)
    finally:
        rt.heal()
        wl.halt()
        md.close()
        history.close()
    assert check(str(out))[0] == 0, (out / "results.json").read_text()[:3000]
    results = json.loads((out / "results.json").read_text())
    assert results["stats"]["by_f"]["init-producer"]["ok"] > 50


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("workload,package", [(w, p) for w in sorted(SHORT) for p in FAULTS[w]])
def test_long_run_is_valid(shared, tmp_path, workload, package, seed):
    code, results, meta = run_once(tmp_path, workload, [package], seed=seed, time_limit=30,
                                   cluster=shared.cluster_name)
    assert_valid(code, results, meta, f"{workload} x {package} seed {seed}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("workload", sorted(FAULTS))
def test_long_combined_faults_are_valid(shared, tmp_path, workload, seed):
    code, results, meta = run_once(tmp_path, workload, FAULTS[workload], seed=seed, time_limit=60,
                                   cluster=shared.cluster_name)
    assert_valid(code, results, meta, f"{workload} x all faults seed {seed}")
