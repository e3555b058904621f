"""The original run a shrink test starts from: an `eoslab run --schedule` on the suite's shared cluster
that shows the anomaly it aims at.

Guarantees: `anomalous_original` plays the schedule with each seed in turn until a run's results.json
has the anomaly type, and returns that run's folder; a lab error, or no seed showing it, fails the
test with what the runs found. The aimed runs of the G1a and lost-write classes show their anomaly in
about half their runs (docs/chaos.md), so the original is a draw like every replay.
"""
from __future__ import annotations

import json
import os

import pytest

from cluster.run import RunConfig, run


def anomalous_original(tmp_path, cluster: str, workload: str, schedule: list[dict], settings: dict,
                       anomaly: str, seeds=(1, 2, 3, 4), time_limit: float = 10, **cfg) -> str:
    sched = tmp_path / "schedule.json"
    sched.write_text(json.dumps(schedule))
    packages = sorted({e["package"] for e in schedule})
    found = []
    for seed in seeds:
        out = str(tmp_path / f"orig-{seed}")
        code = run(RunConfig(workload=workload, nemesis=packages, time_limit=time_limit, seed=seed, out=out,
                             cluster=cluster, settings=settings, schedule_file=str(sched), **cfg))
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        assert not results.get("lab_errors"), results["lab_errors"]
        with open(os.path.join(out, "run.json")) as f:
            assert json.load(f)["schedule"] == schedule
        if code == 1 and anomaly in results["anomalies"]:
            return out
        found.append((seed, sorted(results.get("anomalies") or {})))
    pytest.fail(f"no original run showed {anomaly}: {found}")
