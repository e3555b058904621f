"""The analysis page and its dimensions: the Kafka version as a dimension, the realtime lag as a
column, a page split by workload and release."""
from __future__ import annotations

import json

import pytest

from pipeline import matrix, synth

pytestmark = pytest.mark.fast


def _run_row(run, version=None, lag=None, anomalies=(), **kw):
    row = {"run": run, "workload": "queue", "config": "acks=all", "fault": "kill", "settings": '{"acks": "all"}',
           "valid": "false" if anomalies else "true", "ops": 100, "anomaly_counts": list(anomalies),
           "allowed_counts": [], "unseen": 0, "acked": 40, "lat_send": None, "lat_poll": None,
           "lat_send_max": 0, "lat_poll_max": 0, "max_realtime_lag_ms": lag, **kw}
    if version is not None:
        row["kafka_version"] = version
    return row


def test_kafka_version_is_a_dimension_and_realtime_lag_a_column(tmp_path):
    from pipeline.store import find_runs
    synth.write_run(str(tmp_path / "a"), n_ops=10, seed=1)
    synth.write_run(str(tmp_path / "b"), n_ops=10, seed=1)
    meta = json.loads((tmp_path / "b" / "run.json").read_text())
    (tmp_path / "b" / "run.json").write_text(json.dumps({**meta, "kafka_version": "3.6"}))
    assert [r.kafka_version for r in find_runs(str(tmp_path))] == ["unknown", "3.6"]

    rows, cols = matrix.aggregate([_run_row("r1", "2.5", 12.5, [("duplicate", 2)]), _run_row("r2", "2.5", None),
                                   _run_row("r3", "4.0", 3.0), _run_row("r4"), _run_row("r5", None, 7.0)])
    assert cols[:7] == ["workload", "config", "fault", "kafka_version", "client", "client_version", "kind"]
    assert "max_realtime_lag_ms" in cols
    anyrow = {r["kafka_version"]: r for r in rows if r["anomaly"] == "(any)"}
    assert sorted(anyrow) == ["2.5", "4.0", "unknown"]
    assert [(anyrow[v]["runs"], anyrow[v]["runs_with"], anyrow[v]["max_realtime_lag_ms"]) for v in sorted(anyrow)] \
        == [(2, 1, 12.5), (1, 0, 3.0), (2, 0, 7.0)]
    dup = next(r for r in rows if r["anomaly"] == "duplicate" and r["kafka_version"] == "2.5")
    assert (dup["runs_with"], dup["count"]) == (1, 2)
    assert matrix.aggregate([_run_row("r6")])[0][0]["max_realtime_lag_ms"] is None
    pq = pytest.importorskip("pyarrow.parquet")
    matrix.write(rows, cols, str(tmp_path / "m.parquet"), str(tmp_path / "m.csv"))
    assert pq.read_table(str(tmp_path / "m.parquet")).schema.field("max_realtime_lag_ms").type == "double"


def test_page_splits_workloads_by_kafka_version():
    from pipeline.html import render
    rows, _ = matrix.aggregate([_run_row("r1", "2.5", 1.5, [("duplicate", 1)]), _run_row("r2", "4.0")])
    runs = [dict(_run_row("r1", "2.5"), seed=1, report=None), dict(_run_row("r2", "4.0"), seed=2, report=None)]
    page = render(rows, runs, {"runs": 2, "ops": 200, "cells": 2, "invalid_runs": 1, "master": "local[1]",
                               "cores": 1, "seconds": 1.0}, "/s", "/o")
    assert "queue, Kafka 2.5: invalid runs" in page and "queue, Kafka 4.0: invalid runs" in page
    assert "<td>1.50</td>" in page.replace("<td class=num>", "<td>")


def test_a_cells_kafka_version_is_its_runs_release(tmp_path):
    from pipeline.sweep import plan
    cells = [{"kafka.version": "2.5", "acks": "all"}, {"acks": "all"}]
    runs = plan(["queue"], ["none"], cells, [0], str(tmp_path), 5.0, kafka_version="3.6")
    assert [r.kafka_version for r in runs] == ["2.5", "3.6"]
    assert all("kafka.version" not in r.settings for r in runs)
    assert "kafka.version=2.5" in runs[0].out and runs[0].out != runs[1].out
    with pytest.raises(ValueError, match="unknown Kafka version"):
        plan(["queue"], ["none"], [{"kafka.version": "1.9"}], [0], str(tmp_path), 5.0)
