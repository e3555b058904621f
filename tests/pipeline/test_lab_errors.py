"""Lab errors in the pipeline: counted apart from anomalies and from valid runs, in the executors' rows,
the matrix, the page, `eoslab sweep` and (on real Spark) `eoslab analyze`."""
from __future__ import annotations

import json
import os

import pytest

from pipeline import matrix, synth

ERR = {"kind": "service-down", "node": "broker-2", "message": "broker-2 was dead before the final heal",
       "log": ["last words"]}


def _row(run, verdict, anomalies=(), config="acks=all", fault="kill"):
    valid = {"valid": "true", "invalid": "false"}.get(verdict, '"unknown"')
    return {"run": run, "workload": "queue", "config": config, "fault": fault, "settings": '{"acks": "all"}',
            "valid": valid, "verdict": verdict, "lab_errors": 1 if verdict == "lab-error" else 0, "ops": 100,
            "anomaly_counts": list(anomalies), "allowed_counts": [], "unseen": 0, "acked": 40, "lat_send": None,
            "lat_poll": None, "lat_send_max": 0, "lat_poll_max": 0, "max_realtime_lag_ms": None}


@pytest.mark.fast
def test_the_matrix_counts_lab_errors_apart_from_anomalies_and_valid_runs(tmp_path):
    rows, cols = matrix.aggregate([_row("a", "valid"), _row("b", "invalid", [("duplicate", 1)]),
                                   _row("c", "lab-error"), _row("d", "lab-error", fault="pause")])
    assert cols.index("lab_errors") == cols.index("runs") + 1
    kill = {(r["kind"], r["anomaly"]): r for r in rows if r["fault"] == "kill"}
    anyrow = kill[("anomaly", "(any)")]
    assert (anyrow["runs"], anyrow["lab_errors"], anyrow["runs_with"], anyrow["rate"]) == (2, 1, 1, 0.5)
    assert kill[("anomaly", "duplicate")]["runs_with"] == 1 and kill[("anomaly", "duplicate")]["lab_errors"] == 1
    assert kill[("anomaly", "(any)")]["ops"] == 200                       # the lab-error run adds no ops
    pause = [r for r in rows if r["fault"] == "pause"]                    # every run of it a lab error
    assert pause and all(r["runs"] == 0 and r["lab_errors"] == 1 and r["rate"] is None and r["runs_with"] == 0
                         for r in pause)
    pq = pytest.importorskip("pyarrow.parquet")
    matrix.write(rows, cols, str(tmp_path / "m.parquet"), str(tmp_path / "m.csv"))
    assert pq.read_table(str(tmp_path / "m.parquet")).schema.field("lab_errors").type == "int64"


@pytest.mark.fast
def test_the_page_shows_lab_errors_as_neither_valid_nor_invalid():
    from pipeline.html import render
    runs = [_row("a", "valid"), _row("b", "invalid", [("duplicate", 1)]), _row("c", "lab-error"),
            _row("d", "lab-error", fault="pause")]
    rows, _ = matrix.aggregate(runs)
    page = render(rows, [dict(r, seed=1, report=None) for r in runs],
                  {"runs": 4, "ops": 400, "cells": 2, "invalid_runs": 1, "lab_error_runs": 2, "master": "local[1]",
                   "cores": 1, "seconds": 1.0}, "/s", "/o")
    assert "1 invalid runs, 2 lab errors" in page
    assert "<th>lab errors</th>" in page and "lab errors by configuration × faults" in page
    assert "lab-error (1): not about Kafka" in page and ">lab</text>" in page


@pytest.mark.fast
def test_an_executor_row_of_a_broken_run_is_lab_error_without_anomaly_counts(tmp_path):
    pytest.importorskip("pyarrow")
    from checker.result import EXIT_LAB_ERROR, exit_code
    from pipeline.executors import analyze_run
    d = tmp_path / "r"
    synth.write_run(str(d), n_ops=300, seed=4, inject={"duplicate": 1}, nemesis=["kill"], lab_errors=[ERR])
    meta = {"run": "r", "history": str(d / "history.jsonl"), "workload": "queue", "fault": "kill",
            "config": "(defaults)", "kafka_version": "unknown", "seed": 4, "settings": "{}", "dir": str(d),
            "report": None}
    row = analyze_run(meta, str(tmp_path / "ops"), str(tmp_path / "report.html"))
    assert row["problem"] is None and row["verdict"] == "lab-error" and row["lab_errors"] == 1
    assert row["anomaly_counts"] == [] and row["valid"] == '"unknown"'
    result = json.loads(row["result"])
    assert set(result["unconfirmed"]) == {"duplicate"} and exit_code(result) == EXIT_LAB_ERROR
    assert "LAB ERROR" in (tmp_path / "report.html").read_text()


@pytest.mark.fast
def test_sweep_counts_lab_errors_apart_and_runs_them_again_when_resumed(tmp_path):
    from pipeline.sweep import finished, plan, sweep
    runs = plan(["queue"], ["kill"], [{"acks": "all"}, {"acks": "1", "enable.idempotence": "false"}], [0],
                str(tmp_path), 1.0)
    calls = []

    def fake_run(cfg, log=None):                # what `eoslab run` leaves: run.json, history, results.json
        calls.append(cfg.out)
        broken = cfg.settings["acks"] == "1"
        synth.write_run(cfg.out, n_ops=20, seed=cfg.seed, lab_errors=[ERR] if broken else None)
        with open(os.path.join(cfg.out, "results.json"), "w") as f:
            json.dump({"verdict": "lab-error" if broken else "valid"}, f)
        return 4 if broken else 0

    got = sweep(runs, log=open(os.devnull, "w"), run_fn=fake_run)
    assert (got["done"], got["failed"], got["lab_errors"]) == (1, 0, 1)
    assert got["lab_error_runs"][0]["why"].startswith("service-down (broker-2)")
    assert finished(runs[0].out) and not finished(runs[1].out)
    calls.clear()
    again = sweep(runs, log=open(os.devnull, "w"), run_fn=fake_run)
    assert calls == [runs[1].out] and (again["skipped"], again["lab_errors"]) == (1, 1)


@pytest.mark.fast
def test_sweep_cli_exits_1_when_a_run_was_a_lab_error(tmp_path, capsys, monkeypatch):
    import pipeline.sweep as sw
    from eoslab.cli import main
    monkeypatch.setattr(sw, "sweep", lambda runs, log=None: {"done": 0, "skipped": 0, "failed": 0, "lab_errors": 1,
                                                             "failures": [], "lab_error_runs": []})
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"acks": ["all"]}))
    rc = main(["sweep", "--workload", "queue", "--nemesis", "kill", "--settings-matrix", str(m), "--seeds", "1",
               "--out", str(tmp_path / "store")])
    assert rc == 1 and json.loads(capsys.readouterr().out)["lab_errors"] == 1


def test_analyze_on_spark_counts_lab_errors_apart(spark, tmp_path, capsys):
    """A store of three runs of one cell — valid, with a duplicate, and broken by the lab with a duplicate
    too — analysed on real Spark: one invalid run, one lab error, the broken run's duplicate unconfirmed."""
    pq = pytest.importorskip("pyarrow.parquet")
    from eoslab.cli import main
    from pipeline.job import analyze
    store = tmp_path / "store"
    for name, inject, lab in (("ok", {}, None), ("dup", {"duplicate": 1}, None), ("broken", {"duplicate": 1}, [ERR])):
        synth.write_run(str(store / name), n_ops=400, seed=3, inject=inject, nemesis=["kill"], lab_errors=lab)
    summary = analyze(str(store), str(tmp_path / "out"), progress=False, spark=spark, write_reports=True)
    assert (summary["runs"], summary["invalid_runs"], summary["lab_error_runs"]) == (3, 1, 1)
    runs = {r["run"]: r for r in pq.read_table(tmp_path / "out" / "runs.parquet").to_pylist()}
    assert {k: (r["verdict"], r["lab_errors"]) for k, r in runs.items()} == {
        "ok": ("valid", 0), "dup": ("invalid", 0), "broken": ("lab-error", 1)}
    assert main(["check", str(store / "broken" / "history.jsonl")]) == 4
    by_cli, by_spark = json.loads(capsys.readouterr().out), json.loads(runs["broken"]["result"])
    for r in (by_cli, by_spark):
        r["stats"].pop("elapsed_s")
    assert by_spark == by_cli
    rows = {(r["kind"], r["anomaly"]): r for r in pq.read_table(tmp_path / "out" / "matrix.parquet").to_pylist()}
    assert (rows[("anomaly", "(any)")]["runs"], rows[("anomaly", "(any)")]["runs_with"]) == (2, 1)
    assert (rows[("anomaly", "duplicate")]["runs_with"], rows[("anomaly", "duplicate")]["count"]) == (1, 1)
    assert all(r["lab_errors"] == 1 for r in rows.values())
    page = (tmp_path / "out" / "index.html").read_text()
    assert "1 invalid runs, 1 lab errors" in page and "lab-error (1): not about Kafka" in page
    assert "LAB ERROR" in (tmp_path / "out" / "reports" / "broken" / "report.html").read_text()
