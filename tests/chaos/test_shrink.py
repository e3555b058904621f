"""`eoslab shrink` end to end: an anomalous run with four faults, of which only the lost ACKs matter,
shrinks to at most three faults, and OUT/minimal still shows the duplicate.

The run: the queue workload with `workload.resend=restart` (an at-least-once application: after a send
without an answer it restarts its producer, a new producer id, and sends the value again) under
`lost-ack` duplicates (tests/chaos/test_aimed.py); pause and loss around it are noise. The original run
and every replay share one cluster (`--cluster`), so the test stays near two minutes on two cores.
"""
import json
import os

import pytest

from cluster.run import RunConfig, run
from cluster.shrink import Options, Shrinker


def _load(path):
    with open(path) as f:
        return json.load(f)


CLUSTER_ARGS = {"txn_coordinators": 0}
SETTINGS = {"acks": "all", "enable.idempotence": "true", "workload.resend": "restart",
            "delivery.timeout.ms": "3000"}
SCHEDULE = [{"at": 0.5, "package": "pause", "duration": 1.0},
            {"at": 2.0, "package": "lost-ack", "duration": 3.5},
            {"at": 6.0, "package": "loss", "duration": 1.0},
            {"at": 8.0, "package": "pause", "duration": 1.0}]


@pytest.mark.integration
def test_shrink_keeps_the_lost_acks(shared, tmp_path):
    sched = tmp_path / "schedule.json"
    sched.write_text(json.dumps(SCHEDULE))
    orig = str(tmp_path / "orig")
    code = run(RunConfig(workload="queue", nemesis=["pause", "lost-ack", "loss"], time_limit=10, seed=3, out=orig,
                         cluster=shared.cluster_name, settings=SETTINGS, schedule_file=str(sched)))
    results = _load(os.path.join(orig, "results.json"))
    meta = _load(os.path.join(orig, "run.json"))
    assert meta["schedule"] == SCHEDULE and meta["schedule_file"] == str(sched)
    assert code == 1 and "duplicate" in results["anomalies"], results.get("anomalies") or results.get("lab_errors")

    out = tmp_path / "shrunk"
    doc = Shrinker(orig, Options(out=str(out), tries=2, need=1, budget_runs=8, cluster=shared.cluster_name)).shrink()
    assert doc["runs_used"] <= 8 and doc["original_reproduced"] is True
    assert doc["reproduction"] is not None, doc["candidates"]
    assert 1 <= len(doc["minimal"]["schedule"]) <= 3
    assert "lost-ack" in [e["package"] for e in doc["minimal"]["schedule"]]
    minimal = _load(out / "minimal" / "results.json")
    assert "duplicate" in minimal["anomalies"]
    assert _load(out / "minimal" / "run.json")["schedule"] == doc["minimal"]["schedule"]
    assert os.path.exists(out / "minimal" / "history.jsonl") and os.path.exists(out / "minimal" / "report.html")
    saved = _load(out / "shrink.json")
    assert saved["original"]["schedule"] == SCHEDULE and "--schedule" in saved["replay"]
    assert "lost-ack at 2 s" in doc["summary"]
