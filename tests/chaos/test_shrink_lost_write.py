"""`eoslab shrink` end to end for a lost write from a zombie leader: a queue run with acks=1 and
min.insync.replicas=1 whose leader is cut from the rest of the cluster (`partition-leader`) shrinks to
at most three faults, the leader partition kept, and OUT/minimal still shows the lost write.

The run: the aimed unsafe setting of docs/promise.md. While the cut leader's ZooKeeper session expires
and the controller elects a follower, the clients that still reach it have acks=1 records acknowledged
by it alone; at the heal it follows the new leader and truncates them: the checker reports lost-write,
with inconsistent-offsets when a reader had seen them. The pause before it and the loss and pause after
it are noise. The original run and every replay share one cluster (`--cluster`); the size step
(processes) runs within the same budget. A candidate counts only when it shows a lost write
(`--anomaly lost-write`).
"""
import json
import pytest

from cluster.shrink import Options, Shrinker
from tests.chaos.shrink_originals import anomalous_original

CLUSTER_ARGS = {"txn_coordinators": 0}
SETTINGS = {"acks": "1", "topic.min.insync.replicas": "1"}
SCHEDULE = [{"at": 0.5, "package": "pause", "duration": 1.0},
            {"at": 2.0, "package": "partition-leader", "duration": 4.0},
            {"at": 6.5, "package": "loss", "duration": 1.0},
            {"at": 8.0, "package": "pause", "duration": 1.0}]


def _load(path):
    with open(path) as f:
        return json.load(f)


# 3 to 6 minutes on a loaded 2-core machine: with the long runs of `make chaos`, not in `make test`. The
# 4 s cut outlasts the 2 s ZooKeeper session, so the zombie leader is not a matter of timing: on
# 2026-11-27 the schedule gave the lost write in 5 runs of 5 (the sixth was a lab error, since fixed), the
# leader partition alone in 4 of 4 (docs/chaos.md). Up to four seeds are still tried for the original.
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)       # up to four originals and ten replays, each a 12 s run and its check
def test_shrink_keeps_the_leader_partition(shared, tmp_path):
    orig = anomalous_original(tmp_path, shared.cluster_name, "queue", SCHEDULE, SETTINGS, "lost-write",
                              seeds=range(1, 5), time_limit=12, concurrency=12)
    out = tmp_path / "shrunk"
    doc = Shrinker(orig, Options(out=str(out), tries=3, need=1, budget_runs=10, anomalies=["lost-write"],
                                 cluster=shared.cluster_name)).shrink()
    assert doc["runs_used"] <= 10 and doc["original_reproduced"] is True
    assert doc["reproduction"] is not None, doc["candidates"]
    assert 1 <= len(doc["minimal"]["schedule"]) <= 3
    assert "partition-leader" in [e["package"] for e in doc["minimal"]["schedule"]]
    assert "lost-write" in _load(out / "minimal" / "results.json")["anomalies"]
    minimal = _load(out / "minimal" / "run.json")
    assert minimal["schedule"] == doc["minimal"]["schedule"]
    dims = doc["dimensions"]
    assert dims["processes"]["original"] == 12 and minimal["concurrency"] == dims["processes"]["minimal"] <= 12
    replay = _load(out / "shrink.json")["replay"].split()
    assert replay[replay.index("--concurrency") + 1] == str(dims["processes"]["minimal"])
    print(doc["summary"])
