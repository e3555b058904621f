"""`eoslab sweep` with real chaos runs (two short ones), resumed, then analyzed on Spark: the
per-run verdicts equal the results.json each run's own `eoslab check` wrote."""
from __future__ import annotations

import json
import os

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800),
              pytest.mark.filterwarnings("ignore::FutureWarning")]


def _sweep(tmp_path, capsys, acks: list[str]) -> tuple[int, dict, str]:
    from eoslab.cli import main
    m = tmp_path / "matrix.json"
    m.write_text(json.dumps({"matrix": {"acks": acks},
                             "fixed": {"enable.idempotence": False, "topic.min.insync.replicas": 2}}))
    rc = main(["sweep", "--workload", "queue", "--nemesis", "kill", "--settings-matrix", str(m),
               "--seeds", "1", "--first-seed", "7", "--time-limit", "2", "--out", str(tmp_path / "store")])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err


def test_sweep_runs_resumes_and_analyze_agrees_with_each_run(tmp_path, capsys, spark):
    rc, first, log = _sweep(tmp_path, capsys, ["all"])
    assert rc == 0, log
    assert (first["done"], first["skipped"], first["failed"]) == (1, 0, 0)
    assert "[1/1] done 0, skipped 0, failed 0" in log

    rc, second, log = _sweep(tmp_path, capsys, ["all", "1"])          # the first cell is there already
    assert rc == 0, log
    assert (second["done"], second["skipped"], second["failed"]) == (1, 1, 0)
    assert "skip (already there)" in log

    store = tmp_path / "store"
    cells = sorted(os.listdir(store / "queue" / "kill"))
    assert cells == ["acks=1,enable.idempotence=false,topic.min.insync.replicas=2",
                     "acks=all,enable.idempotence=false,topic.min.insync.replicas=2"]
    for c in cells:
        meta = json.loads((store / "queue" / "kill" / c / "seed-7" / "run.json").read_text())
        assert meta["seed"] == 7 and meta["nemesis"] == ["kill"] and "error" not in meta
        assert meta["settings"]["topic.min.insync.replicas"] == "2"

    from pipeline.job import analyze
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "analysis"
    summary = analyze(str(store), str(out), progress=False, spark=spark)
    assert summary["runs"] == 2 and summary["ops"] > 0
    for r in pq.read_table(out / "runs.parquet").to_pylist():
        own = json.loads((store / r["run"] / "results.json").read_text())
        mine = json.loads(r["result"])
        for x in (own, mine):
            x["stats"].pop("elapsed_s")
        assert mine == own, r["run"]
        assert r["report"] == str(store / r["run"] / "report.html")
    rows = pq.read_table(out / "matrix.parquet").to_pylist()
    assert {r["config"] for r in rows} == {"acks=1 enable.idempotence=false topic.min.insync.replicas=2",
                                           "acks=all enable.idempotence=false topic.min.insync.replicas=2"}
    assert all(r["runs"] == 1 and r["fault"] == "kill" for r in rows)
