"""Pure-Python parts of the pipeline: settings matrices, Wilson intervals, latency buckets, the
executor functions on Arrow tables (no Spark), the synthetic generator's promises, the page."""
from __future__ import annotations

import json
import math
import os

import pytest

from pipeline import matrix, synth
from pipeline.sweep import MatrixError, cell_dir, finished, load_matrix

pytestmark = pytest.mark.fast


def _m(tmp_path, text, name="m.json"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_matrix_product_fixed_exclude_cells_null(tmp_path):
    cells = load_matrix(_m(tmp_path, json.dumps({
        "matrix": {"acks": ["1", "all"], "enable.idempotence": [True, False], "transactional.id": [None, "t1"]},
        "fixed": {"topic.min.insync.replicas": 2},
        "exclude": [{"acks": "1", "enable.idempotence": "true"}],
        "cells": [{"acks": "0"}, {"acks": "1", "enable.idempotence": False,
                                  "topic.min.insync.replicas": 2}]})))
    assert len(cells) == 2 * 2 * 2 - 2 + 1       # 2 excluded, the last explicit cell is a duplicate
    assert cells[0] == {"topic.min.insync.replicas": "2", "acks": "1", "enable.idempotence": "false"}
    assert cells[1]["transactional.id"] == "t1"
    assert cells[-1] == {"topic.min.insync.replicas": "2", "acks": "0"}


def test_matrix_bare_object_and_toml(tmp_path):
    assert load_matrix(_m(tmp_path, '{"acks": ["1", "all"]}')) == [{"acks": "1"}, {"acks": "all"}]
    assert load_matrix(_m(tmp_path, 'acks = ["all"]\n"max.in.flight.requests.per.connection" = [5, 6]\n',
                          "m.toml")) == [{"acks": "all", "max.in.flight.requests.per.connection": "5"},
                                         {"acks": "all", "max.in.flight.requests.per.connection": "6"}]


@pytest.mark.parametrize("text, msg", [
    ("[1]", "expected an object"),
    ('{"matrix": {"acks": "all"}}', "non-empty list"),
    ('{"matrix": {"acks": [[1]]}}', "values must be"),
    ('{"matrix": {"acks": ["1"]}, "extra": 1}', "unknown section"),
    ('{"matrix": {"acks": ["1"]}, "exclude": [{"acks": "1"}]}', "every cell is excluded"),
    ('{"acks": ["1"', "not valid JSON"),
])
def test_matrix_errors(tmp_path, text, msg):
    with pytest.raises(MatrixError, match=msg):
        load_matrix(_m(tmp_path, text))


def test_cell_dir_readable_or_hashed():
    assert cell_dir({}) == "defaults"
    assert cell_dir({"b": "2", "a": "1"}) == "a=1,b=2"
    odd = cell_dir({"transactional.id": "t/1"})
    assert odd.startswith("transactional.id=t_1-") and "/" not in odd
    assert cell_dir({"transactional.id": "t 1"}) != cell_dir({"transactional.id": "t_1"})
    assert len(cell_dir({f"k{i}": "v" * 30 for i in range(10)})) < 120


def test_finished_needs_history_verdict_and_no_error(tmp_path):
    d = tmp_path / "r"
    synth.write_run(str(d), n_ops=20, seed=1)
    assert not finished(str(d))                       # no results.json yet
    (d / "results.json").write_text("{}")
    assert finished(str(d))
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps({**meta, "error": "boom"}))
    assert not finished(str(d))


def test_wilson_known_values():
    assert matrix.wilson(0, 3) == (0.0, pytest.approx(3.841459 / (3 + 3.841459), rel=1e-6))
    lo, hi = matrix.wilson(1, 3)
    assert (round(lo, 4), round(hi, 4)) == (0.0615, 0.7923)
    assert matrix.wilson(10, 10)[1] == 1.0 and matrix.wilson(5, 0) == (0.0, 1.0)


def test_buckets_and_quantiles():
    from pipeline.latency import bucket, bucket_mid_ns
    assert bucket(999) == 0 and bucket(1000) == 1 and bucket(10 ** 15) == matrix_last()
    for ns in (1_500, 2_000_000, 3_000_000, 7_654_321_000):
        b = bucket(ns)
        assert abs(bucket_mid_ns(b) / ns - 1) < 0.062
    hist = {bucket(1_000_000): 98, bucket(50_000_000): 2}
    assert matrix.quantile_ms(hist, 0.5) == pytest.approx(1.0, rel=0.06)
    assert matrix.quantile_ms(hist, 0.99) == pytest.approx(50.0, rel=0.06)
    assert matrix.quantile_ms({}, 0.5) is None


def matrix_last():
    from pipeline.latency import N_BUCKETS
    return N_BUCKETS - 1


def test_build_rows_fills_every_type_and_orders_them():
    cells = [{"workload": "q", "config": "c", "fault": "f", "runs": 4, "ops": 1000, "invalid": 1,
              "unseen_records": 3, "runs_unseen": 2, "acked_records": 300, "send_max": 2_000_000,
              "poll_max": None, "settings": '{"acks": "1"}'}]
    found = [{"workload": "q", "config": "c", "fault": "f", "kind": "anomaly", "anomaly": "duplicate",
              "runs_with": 1, "count": 5},
             {"workload": "q", "config": "c", "fault": "f", "kind": "allowed", "anomaly": "G0",
              "runs_with": 2, "count": 2}]
    rows, cols = matrix.build_rows(cells, found, {"lat_send": [], "lat_poll": []})
    assert cols[-1] == "setting.acks" and rows[0]["setting.acks"] == "1"
    names = [(r["kind"], r["anomaly"]) for r in rows]
    assert names[-3:] == [("anomaly", "unseen"), ("anomaly", "(any)"), ("allowed", "G0")]
    dup = next(r for r in rows if r["anomaly"] == "duplicate")
    assert (dup["runs_with"], dup["count"], dup["rate"], dup["per_million_ops"]) == (1, 5, 0.25, 5000.0)
    assert next(r for r in rows if r["anomaly"] == "unseen")["unseen_share"] == 0.01
    assert dup["send_max_ms"] == 2.0 and dup["poll_max_ms"] is None and dup["send_p50_ms"] is None


def test_executors_without_spark(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from checker.kafka import check_kafka
    from pipeline.executors import check_run, convert_run, partition_dir
    p = tmp_path / "h.jsonl"
    synth.generate(str(p), n_ops=400, seed=3, inject={"duplicate": 1, "g1a": 1}, nemesis=["kill"])
    st = convert_run("a/b=c", str(p), str(tmp_path / "ops"))
    assert st["problem"] is None and st["ops"] == 400
    assert st["path"] == str(tmp_path / "ops" / "run=a%2Fb%3Dc" / "part-00000.parquet")
    assert partition_dir("x%y z") == "run=x%25y z"
    rows = pq.read_table(st["path"]).to_pylist()
    assert [json.loads(r["op"]) for r in rows] == [json.loads(x) for x in p.read_text().splitlines()]
    out = check_run("a/b=c", st["path"])
    want = check_kafka(str(p))
    got = json.loads(out["result"])
    for r in (want, got):
        r["stats"].pop("elapsed_s")
    assert got == json.loads(json.dumps(want)) and dict(out["anomaly_counts"]) == {"duplicate": 1, "G1a": 1}
    with open(p, "a") as fh:
        fh.write("{not json\n")
    st = convert_run("a/b=c", str(p), str(tmp_path / "ops2"))
    assert st["path"] is None and "line 401: not valid JSON" in st["problem"]
    assert not any(f.name.endswith(".parquet") for f in (tmp_path / "ops2").rglob("*"))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synth_injections_give_exactly_the_promised_findings(tmp_path, seed):
    from checker.kafka import check_kafka
    p = str(tmp_path / "h.jsonl")
    inject = {"duplicate": 2, "lost": 2, "g1a": 1, "rewind": 2, "unseen": 1}
    synth.generate(p, n_ops=1500, seed=seed, inject=inject, nemesis=["kill", "pause"])
    r = check_kafka(p)
    counts, unseen = synth.expected_findings(inject)
    assert r["stats"]["anomaly_counts"] == counts and r["stats"]["unseen"]["count"] == unseen
    assert r["stats"]["allowed_counts"] == {}
    synth.generate(p, n_ops=1500, seed=seed, nemesis=["kill"])
    assert check_kafka(p)["valid"] is True


def test_heatmap_escapes_and_stays_local():
    from pipeline.html import heatmap
    cell = {"runs": 2, "runs_with": 1, "rate": 0.5, "ci_low": 0.1, "ci_high": 0.9, "count": 3}
    svg = heatmap(["<b>acks=1</b>"], ["kill&pause"], {("<b>acks=1</b>", "kill&pause"): cell}, "t")
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "kill&amp;pause" in svg
    assert "1/2" in svg and "http" not in svg and math.isfinite(len(svg))
    assert os.linesep not in svg
