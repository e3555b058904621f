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


def _meta(run: str, history: str, **kw) -> dict:
    return {"run": run, "history": history, "workload": "queue", "fault": "kill", "config": "(defaults)",
            "kafka_version": "unknown", "seed": 3, "settings": "{}", "dir": os.path.dirname(history),
            "report": None, **kw}


def test_executors_without_spark(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from checker.kafka import check_kafka
    from pipeline.executors import analyze_run, partition_dir
    p = tmp_path / "h.jsonl"
    synth.generate(str(p), n_ops=400, seed=3, inject={"duplicate": 1, "g1a": 1}, nemesis=["kill"])
    out = analyze_run(_meta("a/b=c", str(p)), str(tmp_path / "ops"))
    path = tmp_path / "ops" / "run=a%2Fb%3Dc" / "part-00000.parquet"
    assert out["problem"] is None and out["ops"] == 400 and path.is_file()
    assert partition_dir("x%y z") == "run=x%25y z"
    rows = pq.read_table(path).to_pylist()
    lines = [json.loads(x) for x in p.read_text().splitlines()]
    assert [json.loads(r["op"]) for r in rows] == lines
    assert [(r["pos"], r["index"], r["time"], r["type"], r["f"], r["process"]) for r in rows] == \
        [(i, d["index"], d["time"], d["type"], d["f"], str(d["process"])) for i, d in enumerate(lines)]
    from checker.result import with_verdict
    want = with_verdict(check_kafka(str(p)))              # as `eoslab check` prints it: with its verdict
    got = json.loads(out["result"])
    for r in (want, got):
        r["stats"].pop("elapsed_s")
    assert got == json.loads(json.dumps(want)) and dict(out["anomaly_counts"]) == {"duplicate": 1, "G1a": 1}
    assert out["max_realtime_lag_ms"] == (want.get("realtime_lag") or {}).get("max_ms")
    with open(p, "a") as fh:
        fh.write("{not json\n")
    out = analyze_run(_meta("a/b=c", str(p)), str(tmp_path / "ops2"))
    assert out["valid"] is None and "line 401: not valid JSON" in out["problem"]
    assert not any(f.name.endswith(".parquet") for f in (tmp_path / "ops2").rglob("*"))


def test_ops_without_index_blank_lines_and_odd_shapes(tmp_path):
    """The reader's index for lines without one, blank lines skipped, the line kept as written,
    and latencies equal to the plain loop's whatever the shapes (the columnar path or not)."""
    pq = pytest.importorskip("pyarrow.parquet")
    from pipeline.executors import analyze_run
    from pipeline.latency import latencies
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 1, 5]], "time": 10},
           {"process": "nemesis", "type": "info", "f": "start-kill", "value": None, "time": 15},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", 1, [0, 5]]], "time": 2_000_010},
           {"process": "0", "type": "invoke", "f": "poll", "value": [["poll"]], "time": 20},
           {"process": "0", "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 5]]}]], "time": 3_000_020,
            "error": {"odd": True}},
           {"process": 1, "type": "invoke", "f": "send", "value": [["send", 1, 6]], "time": 30.0},
           {"process": 1, "type": "info", "f": "send", "value": [["send", 1, 6]], "time": 9_000_030},
           {"process": 2, "type": "invoke", "f": "poll", "value": [["poll"]]}]
    text = "\n".join(json.dumps(d) for d in ops[:3]) + "\n\n  \n" + "\n".join(json.dumps(d) for d in ops[3:]) + "\n"
    p = tmp_path / "h.jsonl"
    p.write_text(text)
    out = analyze_run(_meta("r", str(p)), str(tmp_path / "ops"))
    rows = pq.read_table(tmp_path / "ops" / "run=r" / "part-00000.parquet").to_pylist()
    assert [r["index"] for r in rows] == list(range(8)) and [json.loads(r["op"]) for r in rows] == ops
    assert [r["process"] for r in rows] == ["0", "nemesis", "0", "0", "0", "1", "1", "2"]
    assert rows[4]["error"] == '{"odd":true}' and rows[5]["time"] == 30 and rows[7]["time"] is None
    assert [r["error"] for r in rows].count(None) == 7
    with_index = [dict(d, index=i) for i, d in enumerate(ops)]
    send, poll, smax, pmax = latencies(with_index)
    assert (out["lat_send"], out["lat_poll"], out["lat_send_max"], out["lat_poll_max"]) == (send, poll, smax, pmax)
    assert (smax, pmax) == (2_000_000, 3_000_000)        # the float time is not an integer time: skipped


@pytest.mark.parametrize("text", ['{"a":"é"}\n{"b":1}\n', '{"a":1}\r\n{"b":"x\\ny"}\r\n', '{"a":1}\n{"b":2}',
                                  '{"a":1}\n\n  \n{"b":2}\n', '{"a":1}\n\r\n{"b":2}', "", "\n\n"])
def test_op_lines_column_is_each_line_as_written(text):
    """The `op` column: every non-blank line as written (a trailing \\r kept, no newline), with or
    without a newline at the end, whichever way the column is built (one buffer, or line by line
    when blank lines are among them)."""
    from pipeline.executors import lines_column
    data = text.encode()
    want = [ln.decode() for ln in data.split(b"\n") if ln.strip()]
    col = lines_column(data, len(want))
    col.validate(full=True)
    assert col.type == "string" and col.to_pylist() == want


def test_gzipped_history_gives_the_same_parquet_and_result(tmp_path):
    import gzip

    pq = pytest.importorskip("pyarrow.parquet")
    from pipeline.executors import analyze_run
    p = tmp_path / "plain" / "history.jsonl"
    p.parent.mkdir()
    synth.generate(str(p), n_ops=300, seed=5, inject={"lost": 1}, nemesis=["kill"])
    z = tmp_path / "z" / "history.jsonl.gz"
    z.parent.mkdir()
    z.write_bytes(gzip.compress(p.read_bytes()))
    a = analyze_run(_meta("a", str(p)), str(tmp_path / "ops"))
    b = analyze_run(_meta("b", str(z)), str(tmp_path / "ops"))
    ta = pq.read_table(tmp_path / "ops" / "run=a" / "part-00000.parquet")
    tb = pq.read_table(tmp_path / "ops" / "run=b" / "part-00000.parquet")
    assert ta.equals(tb) and ta.num_rows == 300 and a["problem"] is None
    drop = ("run", "history", "dir", "result")
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def _fresh_python(tmp_path, code):
    """A 200-op history in tmp_path, and the program `code(path of that history)` gives, run by a
    fresh Python in the project's root: the finished process."""
    import subprocess
    import sys

    p = tmp_path / "h.jsonl"
    synth.generate(str(p), n_ops=200, seed=2, inject={"duplicate": 1}, nemesis=["kill"])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-c", code(p)], capture_output=True, text=True, cwd=root, timeout=120)


def test_workers_of_an_owned_session_convert_without_importing_pandas(tmp_path):
    """In a fresh process (as a Spark worker is), after arrow_without_pandas the executors' whole
    function runs without pandas being imported, gives the Parquet it gives otherwise, and
    `import pandas` still works for anyone who wants it; once pandas is in, nothing is done."""
    pytest.importorskip("pandas")
    r = _fresh_python(tmp_path, lambda p: (
        "import sys, json\n"
        "from pipeline.executors import analyze_run, arrow_without_pandas\n"
        "import pyarrow.parquet as pq\n"
        "assert arrow_without_pandas() is True\n"
        f"row = analyze_run({{'run': 'r', 'history': {str(p)!r}}}, {str(tmp_path / 'a')!r})\n"
        "assert row['problem'] is None and row['anomaly_counts'] == [('duplicate', 1)], row\n"
        f"t = pq.read_table({str(tmp_path / 'a' / 'run=r' / 'part-00000.parquet')!r})\n"
        "assert 'pandas' not in sys.modules\n"
        "import pandas\n"
        "assert arrow_without_pandas() is False\n"
        f"row2 = analyze_run({{'run': 'r', 'history': {str(p)!r}}}, {str(tmp_path / 'b')!r})\n"
        f"assert t.equals(pq.read_table({str(tmp_path / 'b' / 'run=r' / 'part-00000.parquet')!r}))\n"
        "print(t.num_rows)\n"))
    assert r.returncode == 0 and r.stdout.split() == ["200"], r.stderr


def test_reader_and_checker_errors_are_told_apart(tmp_path):
    """A line the checker's reader rejects is the run's problem as the reader words it (no
    Parquet); an op the reader accepts but the checker cannot use is "the checker failed", named
    by file and line as `eoslab check` names it."""
    from checker.history import HistoryError
    from checker.kafka import check_kafka
    from pipeline.executors import analyze_run
    good = {"process": 0, "type": "invoke", "f": "send", "value": [["send", 1, 5]], "time": 10}
    bad = {"process": 0, "type": "ok", "f": "send", "value": 7, "time": 20}
    p = tmp_path / "h.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(HistoryError) as e:
        check_kafka(str(p))
    out = analyze_run(_meta("r", str(p)), str(tmp_path / "ops"))
    assert out["problem"] == f"the checker failed: HistoryError: {' '.join(str(e.value).split())}"
    assert f"{p}: line 2" in out["problem"] and out["valid"] is None
    p.write_text(json.dumps(good) + "\n" + '{"process": 0, "type": "ok"}\n')
    out = analyze_run(_meta("r", str(p)), str(tmp_path / "ops"))
    assert out["problem"].startswith(f"{p}: line 2") and "checker failed" not in out["problem"]
    assert not (tmp_path / "ops").exists()


@pytest.mark.parametrize("seed", range(6))
def test_columnar_latencies_equal_the_plain_loop(seed):
    """Random histories (processes that share a printed name, repeated invokes, completions
    without an invoke, non-client fs, nemesis ops): the columnar pairing and buckets give exactly
    what `latencies` gives."""
    import random

    from pipeline.executors import ops_table
    from pipeline.latency import EDGES, bucket, latencies
    rng = random.Random(seed)
    ops, t = [], 0
    for i in range(3000):
        t += rng.choice([0, 1, 999, 1000, 10 ** rng.randint(0, 11)])
        p = rng.choice([0, 1, 2, "1", "nemesis"])
        d = {"index": i, "time": t, "process": p, "type": rng.choice(["invoke", "invoke", "ok", "info", "fail"]),
             "f": rng.choice(["send", "poll", "txn", "assign"])}
        ops.append(d)
    _table, got = ops_table(ops, "".join(json.dumps(d) + "\n" for d in ops).encode())
    assert got == latencies(ops)
    assert all(bucket(e) == b + 1 and bucket(e - 1) == b for b, e in enumerate(EDGES))


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


def test_ops_parquet_is_snappy_with_min_max_of_the_number_columns_only(tmp_path):
    """The ops table is written as Spark writes Parquet by default (snappy), with min/max of
    `pos`, `index` and `time` (what range queries filter on) and none of the string columns."""
    pq = pytest.importorskip("pyarrow.parquet")
    from pipeline.executors import analyze_run
    p = tmp_path / "h.jsonl"
    synth.generate(str(p), n_ops=300, seed=5, inject={}, nemesis=["kill"])
    assert analyze_run(_meta("r", str(p)), str(tmp_path / "ops"))["problem"] is None
    from pipeline.executors import OPS_ARROW
    assert pq.read_table(tmp_path / "ops" / "run=r" / "part-00000.parquet").schema == OPS_ARROW
    meta = pq.ParquetFile(tmp_path / "ops" / "run=r" / "part-00000.parquet").metadata
    for g in range(meta.num_row_groups):
        cols = {meta.row_group(g).column(c).path_in_schema: meta.row_group(g).column(c)
                for c in range(meta.num_columns)}
        assert {c.compression for c in cols.values()} == {"SNAPPY"}
        with_stats = {name for name, c in cols.items() if c.is_stats_set and c.statistics.has_min_max}
        assert with_stats == {"pos", "index", "time"}


@pytest.mark.fast
def test_an_app_run_in_a_store_is_judged_by_the_app_checker(tmp_path):
    """`eoslab analyze` over a store holding an `eoslab app run`: its row carries check_app's verdict and
    counts (the Kafka checker would misread the copier's history), and its store label is "app"."""
    pytest.importorskip("pyarrow")
    from pipeline.executors import analyze_run
    from pipeline.store import find_runs
    from tests.checker.test_app_check import copier
    d = tmp_path / "store" / "app-1"
    d.mkdir(parents=True)
    r = copier(n=20)
    r.send([20])                                             # acknowledged, never copied: lost
    r.final()
    (d / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in r.ops))
    (d / "run.json").write_text(json.dumps({"kind": "app", "cmd": "python copier.py", "instances": 1,
                                            "nemesis": ["kill-app"], "kafka_version": "3.6"}))
    (info,) = find_runs(str(tmp_path / "store"))
    assert info.workload == "app"
    meta = {"run": "app-1", "history": str(d / "history.jsonl"), "workload": "app", "fault": "kill-app",
            "config": "(defaults)", "kafka_version": "3.6", "seed": None, "settings": "{}", "dir": str(d),
            "report": None}
    row = analyze_run(meta, str(tmp_path / "ops"), str(tmp_path / "report.html"))
    assert row["problem"] is None and row["verdict"] == "invalid"
    assert row["anomaly_counts"] == [["lost-write", 1]] or row["anomaly_counts"] == [("lost-write", 1)]
    assert row["acked"] == 21
    assert "lane" in (tmp_path / "report.html").read_text().lower()
