"""`eoslab shrink` end to end for a lost write after an unclean leader election: a queue run with
acks=1, unclean election on and min.insync.replicas=1 under a leader kill shrinks to at most three
faults, the kill-leader kept, and OUT/minimal still shows the lost write.

The run: the aimed unsafe setting of docs/promise.md (records acknowledged by a leader alone are
truncated when another replica leads: the checker reports lost-write, with inconsistent-offsets when
a reader had seen them), with twelve processes (`--concurrency 12`) so that more acknowledged records
are still unreplicated when the leader dies; pause and loss around the kill are noise. The original run and every replay
share one cluster (`--cluster`); the size step (processes) runs within the same budget. A candidate
counts only when it shows a lost write (`--anomaly lost-write`): the same runs often show
inconsistent-offsets too, and the shrink is after the lost write.
"""
import json
import pytest

from cluster.shrink import Options, Shrinker
from tests.chaos.shrink_originals import anomalous_original

CLUSTER_ARGS = {"txn_coordinators": 0}
SETTINGS = {"acks": "1", "topic.unclean.leader.election.enable": "true", "topic.min.insync.replicas": "1"}
SCHEDULE = [{"at": 0.5, "package": "pause", "duration": 1.0},
            {"at": 2.0, "package": "kill-leader", "duration": 3.0},
            {"at": 6.0, "package": "loss", "duration": 1.0},
            {"at": 8.0, "package": "pause", "duration": 1.0}]


def _load(path):
    with open(path) as f:
        return json.load(f)


# 4 to 9 minutes on a loaded 2-core machine, and the anomaly is timing-dependent: with the long runs of
# `make chaos`, not in `make test`. Up to ten seeds are tried for the original. Measured on 2026-11-27
# (after that day's replication and ZooKeeper fixes) the schedule gave the lost write far less often
# than the 2 runs in 5 it used to: one attempt found it only at seed 7 and then not in 3 replays, so
# the test fails more often than it passes until its schedule makes the lost write likely again.
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)       # up to ten originals and ten replays, each a 10-12 s run and its check
def test_shrink_keeps_the_leader_kill(shared, tmp_path):
    orig = anomalous_original(tmp_path, shared.cluster_name, "queue", SCHEDULE, SETTINGS, "lost-write",
                              seeds=range(1, 11), time_limit=12, concurrency=12)
    out = tmp_path / "shrunk"
    doc = Shrinker(orig, Options(out=str(out), tries=3, need=1, budget_runs=10, anomalies=["lost-write"],
                                 cluster=shared.cluster_name)).shrink()
    assert doc["runs_used"] <= 10 and doc["original_reproduced"] is True
    assert doc["reproduction"] is not None, doc["candidates"]
    assert 1 <= len(doc["minimal"]["schedule"]) <= 3
    assert "kill-leader" in [e["package"] for e in doc["minimal"]["schedule"]]
    assert "lost-write" in _load(out / "minimal" / "results.json")["anomalies"]
    minimal = _load(out / "minimal" / "run.json")
    assert minimal["schedule"] == doc["minimal"]["schedule"]
    dims = doc["dimensions"]
    assert dims["processes"]["original"] == 12 and minimal["concurrency"] == dims["processes"]["minimal"] <= 12
    replay = _load(out / "shrink.json")["replay"].split()
    assert replay[replay.index("--concurrency") + 1] == str(dims["processes"]["minimal"])
    print(doc["summary"])
