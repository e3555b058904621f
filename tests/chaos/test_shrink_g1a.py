"""`eoslab shrink` end to end for G1a: a txn run before Kafka 4.0 whose delayed EndTxn copies let the
reader see records of a transaction the client aborted shrinks to at most three faults, the
delay-end-txn kept, and OUT/minimal still shows G1a.

The run: the txn workload on a cluster and clients behaving as Kafka 3.6 (no epoch bump per
transaction, KIP-890 part 2 off) under `delay-end-txn`, as the aimed sweep in docs/promise.md; a late
copy of a COMMIT ends the next transaction, so one the client aborts commits. `workload.abort-ratio=0.5`
makes that next transaction an abort more often, and 8 sends per transaction (`workload.max-sends`) keep it
open long enough for the copy to land in it: with 4, most copies found the client's own EndTxn under way
(CONCURRENT_TRANSACTIONS) and the original schedule showed G1a in 3 of 6 runs, with 8 in 5 of 6
(2026-11-28, a quiet machine), so a shrink candidate that keeps the delay is no longer missed three tries
in a row. Pause and loss around it are noise. The original run
and every replay share one cluster (`--cluster`) started as 3.6; the size steps (processes, records
per transaction) run within the same budget.
"""
import json
import pytest

from cluster.shrink import Options, Shrinker
from tests.chaos.shrink_originals import anomalous_original

CLUSTER_ARGS = {"controller_args": ["--pid-block-size=20"], "txn_coordinators": 2,
                "broker_args": ["--kafka-version=3.6"], "txn_coordinator_args": ["--kafka-version=3.6"]}
SETTINGS = {"acks": "all", "enable.idempotence": "true", "topic.min.insync.replicas": "2",
            "workload.abort-ratio": "0.5", "workload.max-sends": "8"}
SCHEDULE = [{"at": 0.5, "package": "pause", "duration": 1.0},
            {"at": 2.0, "package": "delay-end-txn", "duration": 4.0},
            {"at": 6.5, "package": "loss", "duration": 1.0},
            {"at": 8.0, "package": "pause", "duration": 1.0}]


def _load(path):
    with open(path) as f:
        return json.load(f)


# 4 to 6 minutes on a loaded 2-core machine, and the anomaly is timing-dependent (an original run with the
# key fault shows it in about 5 runs of 6): with the long runs of `make chaos`, not in `make test`.
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)       # up to four originals and ten replays, each a 10-12 s run and its check
def test_shrink_keeps_the_delayed_end_txn(shared, tmp_path):
    orig = anomalous_original(tmp_path, shared.cluster_name, "txn", SCHEDULE, SETTINGS, "G1a",
                              kafka_version="3.6")
    out = tmp_path / "shrunk"
    doc = Shrinker(orig, Options(out=str(out), tries=3, need=1, budget_runs=10,
                                 cluster=shared.cluster_name)).shrink()
    assert doc["runs_used"] <= 10 and doc["original_reproduced"] is True
    assert doc["reproduction"] is not None, doc["candidates"]
    assert 1 <= len(doc["minimal"]["schedule"]) <= 3
    assert "delay-end-txn" in [e["package"] for e in doc["minimal"]["schedule"]]
    assert "G1a" in _load(out / "minimal" / "results.json")["anomalies"]
    minimal = _load(out / "minimal" / "run.json")
    assert minimal["schedule"] == doc["minimal"]["schedule"] and minimal["kafka_version"] == "3.6"
    dims = doc["dimensions"]
    assert (dims["processes"]["original"], dims["records"]["original"]) == (4, 8)
    assert minimal["concurrency"] == dims["processes"]["minimal"] <= 4
    assert int(minimal["settings"]["workload.max-sends"]) == dims["records"]["minimal"] <= 8
    replay = _load(out / "shrink.json")["replay"].split()
    assert replay[replay.index("--kafka-version") + 1] == "3.6"
    assert replay[replay.index("--concurrency") + 1] == str(dims["processes"]["minimal"])
    print(doc["summary"])
