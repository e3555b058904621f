"""`eoslab analyze` on local Spark: the exact matrix for a store with known anomalies, and the
per-run verdicts equal to `eoslab check` run on each history one by one."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.conftest import (EMPTY_FINDINGS, EMPTY_RUN, FIXED_LATENCY_NS, FIXED_LATENCY_RUN,
                                     WITH_REPORT_RUN)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ROOT = Path(__file__).resolve().parents[2]


def z_wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval, written out from its textbook form (z = 1.96 for 95%)."""
    z = 1.959963984540054
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(n) / (n + z * z) * math.sqrt(k / n * (1 - k / n) + z * z / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def expected_findings(run: str, inject: dict) -> tuple[dict, int]:
    """What check_kafka reports for a run of the store: the injections', or, for the empty
    history, Jepsen's empty-transaction-graph (a history with nothing to check is not valid)."""
    from pipeline import synth
    return (dict(EMPTY_FINDINGS), 0) if run == EMPTY_RUN else synth.expected_findings(inject)


def expected_matrix(spec: dict) -> dict:
    """(config, fault, anomaly) -> (runs, runs_with, count) from the injections alone."""
    from pipeline.store import config_label, fault_label
    cells: dict = {}
    for run, (settings, nemesis, _seed, inject) in spec.items():
        counts, unseen = expected_findings(run, inject)
        cell = cells.setdefault((config_label(settings), fault_label(nemesis)), [])
        cell.append((counts, unseen))
    out = {}
    for (config, fault), runs in cells.items():
        types = {t for counts, _ in runs for t in counts}
        for t in types:
            out[(config, fault, t)] = (len(runs), sum(1 for c, _ in runs if c.get(t)),
                                       sum(c.get(t, 0) for c, _ in runs))
        out[(config, fault, "unseen")] = (len(runs), sum(1 for _, u in runs if u), sum(u for _, u in runs))
        bad = sum(1 for c, _ in runs if c)
        out[(config, fault, "(any)")] = (len(runs), bad, bad)
    return out


def matrix_rows(out: str) -> list[dict]:
    return pq.read_table(os.path.join(out, "matrix.parquet")).to_pylist()


def test_matrix_is_exactly_what_the_injections_imply(analyzed):
    _root, spec, out, summary = analyzed
    want = expected_matrix(spec)
    rows = [r for r in matrix_rows(out) if r["kind"] == "anomaly"]
    got = {(r["config"], r["fault"], r["anomaly"]): (r["runs"], r["runs_with"], r["count"])
           for r in rows if r["runs_with"] or r["anomaly"] in ("unseen", "(any)")}
    assert got == want
    for r in rows:                                    # zero rows too: rate and interval
        lo, hi = z_wilson(r["runs_with"], r["runs"])
        assert r["rate"] == pytest.approx(r["runs_with"] / r["runs"])
        assert (r["ci_low"], r["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert not [r for r in matrix_rows(out) if r["kind"] == "allowed"]
    assert summary["runs"] == len(spec)
    assert summary["invalid_runs"] == sum(1 for run, (*_, inj) in spec.items() if expected_findings(run, inj)[0])


def test_every_checker_type_has_a_row_per_cell(analyzed):
    from checker.kafka.check import TYPES_ORDER
    _root, spec, out, _ = analyzed
    rows = matrix_rows(out)
    cells = {(r["config"], r["fault"]) for r in rows}
    assert len(cells) == len({(json.dumps(s, sort_keys=True), "+".join(n)) for s, n, *_ in spec.values()})
    for cell in cells:
        names = [r["anomaly"] for r in rows if (r["config"], r["fault"]) == cell and r["kind"] == "anomaly"]
        assert names == [t for t in TYPES_ORDER if t != "unseen"] + ["unseen", "(any)"]


def test_settings_become_columns(analyzed):
    _root, spec, out, _ = analyzed
    table = pq.read_table(os.path.join(out, "matrix.parquet"))
    assert {"setting.acks", "setting.enable.idempotence",
            "setting.max.in.flight.requests.per.connection"} <= set(table.column_names)
    for r in table.to_pylist():
        settings = json.loads(r["settings"])
        for k in ("acks", "enable.idempotence", "max.in.flight.requests.per.connection"):
            assert r[f"setting.{k}"] == settings.get(k, "")
    csv = (Path(out) / "matrix.csv").read_text().splitlines()
    assert len(csv) == table.num_rows + 1 and csv[0].startswith('"workload","config","fault"')


def test_spark_verdicts_equal_eoslab_check_one_by_one(analyzed, capsys):
    from eoslab.cli import main
    root, spec, out, _ = analyzed
    runs = {r["run"]: r for r in pq.read_table(os.path.join(out, "runs.parquet")).to_pylist()}
    assert set(runs) == set(spec)
    for rid in sorted(spec):
        rc = main(["check", os.path.join(root, rid, "history.jsonl"), "--model", "kafka"])
        printed = capsys.readouterr().out
        by_cli = json.loads(printed)
        by_spark = json.loads(runs[rid]["result"])
        for r in (by_cli, by_spark):
            r["stats"].pop("elapsed_s")
        assert by_spark == by_cli, rid
        assert rc == (0 if by_cli["valid"] is True else 1)
        assert runs[rid]["valid"] == json.dumps(by_cli["valid"])
    assert json.loads(runs[EMPTY_RUN]["result"])["stats"]["ops"] == 0


def test_ops_are_parquet_partitioned_by_run_and_hold_every_op(analyzed, spark):
    from pipeline.executors import partition_dir
    root, spec, out, _ = analyzed
    parts = sorted(os.listdir(os.path.join(out, "ops")))
    assert parts == sorted(partition_dir(r) for r in spec)
    rid = "1/partition+lost-ack/seed-1"
    ops = pq.read_table(os.path.join(out, "ops", partition_dir(rid))).sort_by("pos").to_pylist()
    lines = [json.loads(x) for x in Path(root, rid, "history.jsonl").read_text().splitlines()]
    assert [json.loads(o["op"]) for o in ops] == lines
    assert [(o["index"], o["time"], o["type"], o["f"]) for o in ops] == \
        [(d["index"], d["time"], d["type"], d["f"]) for d in lines]
    assert {o["process"] for o in ops} == {str(d["process"]) for d in lines}
    counts = {r["run"]: r["count"] for r in spark.read.parquet(os.path.join(out, "ops")).groupBy("run").count().collect()}
    assert counts == {r: len(Path(root, r, "history.jsonl").read_text().splitlines()) for r in spec if r != EMPTY_RUN}


def _send_latencies(path: str) -> list[int]:
    open_, out = {}, []
    for line in Path(path).read_text().splitlines():
        d = json.loads(line)
        if d["process"] == "nemesis":
            continue
        if d["type"] == "invoke":
            open_[d["process"]] = d["time"]
        elif d["f"] == "send":
            out.append(d["time"] - open_.pop(d["process"]))
    return out


def test_latency_summaries(analyzed):
    root, spec, out, _ = analyzed
    runs = {r["run"]: r for r in pq.read_table(os.path.join(out, "runs.parquet")).to_pylist()}
    fixed = runs[FIXED_LATENCY_RUN]
    assert fixed["lat_send_max"] == FIXED_LATENCY_NS == fixed["lat_poll_max"]
    assert len([n for n in fixed["lat_send"] if n]) == 1
    cell = [r for r in spec if r.startswith("1/kill/")]
    lats = sorted(x for r in cell for x in _send_latencies(os.path.join(root, r, "history.jsonl")))
    row = next(r for r in matrix_rows(out) if r["config"] == "acks=1 enable.idempotence=false"
               and r["fault"] == "kill" and r["anomaly"] == "(any)")
    assert row["send_max_ms"] == pytest.approx(lats[-1] / 1e6)
    for q, col in ((0.5, "send_p50_ms"), (0.99, "send_p99_ms")):
        exact = lats[math.ceil(q * len(lats)) - 1] / 1e6
        assert row[col] == pytest.approx(exact, rel=0.06)


def test_index_html_has_heat_maps_and_links_to_every_report(analyzed):
    root, spec, out, _ = analyzed
    page = Path(out, "index.html").read_text()
    assert page.count("<svg") >= 3 and "http://" not in page and "https://" not in page
    assert "<script" not in page
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert len(hrefs) == len(spec)
    for h in hrefs:
        assert Path(out, h).resolve().is_file(), h
    assert any(Path(out, h).resolve() == Path(root, WITH_REPORT_RUN, "report.html").resolve() for h in hrefs)
    assert "1 of 3 runs" in page and "2/3" in page


def _bad_store(tmp_path) -> tuple[Path, int]:
    from pipeline import synth
    run = tmp_path / "store" / "r1"
    synth.write_run(str(run), n_ops=50, seed=1)
    n = len((run / "history.jsonl").read_text().splitlines())
    with open(run / "history.jsonl", "a") as fh:
        fh.write('{"index": 99, "type": "ok", "process": 1, "f": "send", "value": [\n')
    return tmp_path / "store", n + 1


def test_bad_history_line_through_the_cli_is_one_line_and_exit_2(spark, tmp_path, capsys):
    from eoslab.cli import main
    store, line = _bad_store(tmp_path)
    rc = main(["analyze", str(store), "--out", str(tmp_path / "out"), "--no-progress"])   # uses the live session
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    assert re.search(rf"run r1: .*history\.jsonl: line {line}: not valid JSON", lines[0]), lines[0]
    assert not (tmp_path / "out" / "matrix.csv").exists()


def test_bad_history_line_in_a_fresh_process(tmp_path):
    store, line = _bad_store(tmp_path)
    out = subprocess.run([sys.executable, "-m", "eoslab", "analyze", str(store), "--out",
                          str(tmp_path / "out"), "--master", "local[1]", "--no-progress"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert re.search(rf"run r1: .*history\.jsonl: line {line}: not valid JSON", lines[0]), lines[0]
    assert out.stdout == ""


def test_local_workers_import_pyspark_from_files_not_its_zip(spark):
    """A local session's Python workers start from pipeline.spark_daemon: the installed PySpark's
    modules, not the copy in its pyspark.zip (recompiled by every worker)."""
    import pyspark
    assert spark.conf.get("spark.python.daemon.module") == "pipeline.spark_daemon"

    def where(_):
        import sys as s

        import pyspark as p
        return p.__file__, [x for x in s.path if x.endswith("pyspark.zip")]

    got = spark.sparkContext.parallelize([0], 1).map(where).collect()
    assert got == [(pyspark.__file__, [])]


def test_spark_matrix_and_page_keep_two_clients_apart(spark, tmp_path):
    """A store of two clients' runs of one cell (test_clients.py's) through `eoslab analyze`'s job on the
    shared local session: one cell per client in runs.parquet, matrix.parquet and index.html."""
    from pipeline.job import analyze
    from tests.pipeline.test_clients import two_client_store
    store, out = two_client_store(str(tmp_path / "store")), tmp_path / "out"
    summary = analyze(store, str(out), progress=False, spark=spark)
    assert (summary["runs"], summary["cells"], summary["invalid_runs"]) == (4, 2, 1)
    runs = {r["run"]: r for r in pq.read_table(str(out / "runs.parquet")).to_pylist()}
    assert {k: (r["client"], r["client_version"]) for k, r in runs.items()} == {
        "queue/kill/old/seed-1": ("eoslab", ""), "queue/kill/eoslab/seed-2": ("eoslab", "0.9.0"),
        "queue/kill/confluent-kafka/seed-1": ("confluent-kafka", "2.6.0 (librdkafka 2.6.1)"),
        "queue/kill/confluent-kafka/seed-2": ("confluent-kafka", "2.6.0 (librdkafka 2.6.1)")}
    rows = pq.read_table(str(out / "matrix.parquet")).to_pylist()
    anyrow = {r["client"]: (r["runs"], r["runs_with"]) for r in rows if r["anomaly"] == "(any)"}
    assert anyrow == {"confluent-kafka": (2, 1), "eoslab": (2, 0)}
    page = (out / "index.html").read_text()
    assert "queue, client confluent-kafka: invalid runs" in page and "queue, client eoslab: invalid runs" in page
