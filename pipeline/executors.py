"""What Spark executors run: a run's JSONL into Arrow rows, and a run's rows into its verdict.

Guarantees:
- `convert(batches)` (for `mapInArrow`) takes rows (run, history path) and
  yields one row per op in OPS_SCHEMA: the line position `pos`, the op's
  `index`, `time`, `process`, `type`, `f`, `error` as typed columns for
  queries, and the op itself as JSON in `op`, re-serialised from the dict
  `checker.kafka.source.iter_jsonl_dicts` read — the reader and validation
  `eoslab check` uses, so the op is exactly what the checker would see. A
  history the checker would reject yields one row with pos = -1 and the
  checker's one-line message in `problem` (after any rows already read).
- `check_run(table)` (for `groupBy("run").applyInArrow`) takes every row of
  one run (rows with pos < 0 are markers and are dropped), orders them by `pos`, rebuilds the op dicts and calls
  `checker.kafka.check_kafka` on them — the same call `eoslab check --model
  kafka` makes — and returns one RESULT_SCHEMA row: the verdict, the anomaly
  and allowed counts, unseen and acknowledged records, the whole result as
  `eoslab check` prints it (`result`), and the latency histograms and maxima
  of pipeline.latency. A checker failure yields the row with
  `problem` set instead of raising. With `reports_dir`, runs in `need_report`
  also get DIR/<run>/report.html (checker.report, as `eoslab check --out`).
"""
from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.latency import latencies

try:
    import orjson as _orjson
    _loads = _orjson.loads

    def _dumps(d) -> str:
        return _orjson.dumps(d).decode()
except ImportError:  # pragma: no cover - depends on the environment
    import json as _json
    _loads = _json.loads

    def _dumps(d) -> str:
        return _json.dumps(d, separators=(",", ":"))

OPS_SCHEMA = ("run string, pos long, index long, time long, process string, type string, f string, "
              "error string, op string, problem string")
RESULT_SCHEMA = ("run string, valid string, ops long, anomaly_counts map<string,long>, "
                 "allowed_counts map<string,long>, unseen long, acked long, lat_send array<long>, "
                 "lat_poll array<long>, lat_send_max long, lat_poll_max long, result string, "
                 "report string, problem string")
BATCH_ROWS = 32_768

_OPS_ARROW = pa.schema([("run", pa.string()), ("pos", pa.int64()), ("index", pa.int64()),
                        ("time", pa.int64()), ("process", pa.string()), ("type", pa.string()),
                        ("f", pa.string()), ("error", pa.string()), ("op", pa.string()),
                        ("problem", pa.string())])
_COUNTS = pa.map_(pa.string(), pa.int64())
_RESULT_ARROW = pa.schema([("run", pa.string()), ("valid", pa.string()), ("ops", pa.int64()),
                           ("anomaly_counts", _COUNTS), ("allowed_counts", _COUNTS),
                           ("unseen", pa.int64()), ("acked", pa.int64()),
                           ("lat_send", pa.list_(pa.int64())), ("lat_poll", pa.list_(pa.int64())),
                           ("lat_send_max", pa.int64()), ("lat_poll_max", pa.int64()),
                           ("result", pa.string()), ("report", pa.string()), ("problem", pa.string())])


# ---------------------------------------------------------------- JSONL -> rows
def _batch(cols: list[list]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, _OPS_ARROW)],
                                      schema=_OPS_ARROW)


def _rows(run: str, path: str) -> Iterator[pa.RecordBatch]:
    from checker.history import HistoryError
    from checker.kafka.source import iter_jsonl_dicts

    cols: list[list] = [[] for _ in _OPS_ARROW]
    (c_run, c_pos, c_idx, c_time, c_proc, c_type, c_f, c_err, c_op, c_prob) = cols
    pos = 0
    try:
        for d in iter_jsonl_dicts(path):
            tm = d.get("time")
            p = d["process"]
            e = d.get("error")
            c_run.append(run)
            c_pos.append(pos)
            c_idx.append(d["index"])
            c_time.append(tm if type(tm) is int else (int(tm) if type(tm) is float else None))
            c_proc.append(p if type(p) is str else (str(p) if type(p) is int else _dumps(p)))
            c_type.append(d["type"])
            c_f.append(d["f"] if type(d["f"]) is str else _dumps(d["f"]))
            c_err.append(e if e is None or type(e) is str else _dumps(e))
            c_op.append(_dumps(d))
            c_prob.append(None)
            pos += 1
            if pos % BATCH_ROWS == 0:
                yield _batch(cols)
                for c in cols:
                    c.clear()
    except HistoryError as e:
        for c in cols:
            c.append(None)
        c_run[-1], c_pos[-1], c_prob[-1] = run, -1, " ".join(str(e).split())
    if c_run:
        yield _batch(cols)


def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: (run, history) rows -> the ops of each run (OPS_SCHEMA)."""
    for b in batches:
        d = b.to_pydict()
        for run, path in zip(d["run"], d["history"]):
            yield from _rows(run, path)


# ---------------------------------------------------------------- rows -> verdict
def _one(run: str, ops: list[dict], report_path: str | None) -> dict:
    from checker.kafka import check_kafka
    from checker.result import to_json

    series = None
    if report_path:
        from checker.report_series import SeriesCollector
        series = SeriesCollector()
    result = check_kafka(ops, series=series)
    stats = result["stats"]
    if report_path:
        from checker.report import write_report
        os.makedirs(os.path.dirname(report_path), exist_ok=True)
        write_report(report_path, result, series, title=f"{run} (kafka)")
    send, poll, smax, pmax = latencies(ops)
    return {"run": run, "valid": to_json(result["valid"]), "ops": stats["ops"],
            "anomaly_counts": list(stats["anomaly_counts"].items()),
            "allowed_counts": list(stats["allowed_counts"].items()),
            "unseen": stats["unseen"]["count"], "acked": stats["records"]["acked"],
            "lat_send": send, "lat_poll": poll, "lat_send_max": smax, "lat_poll_max": pmax,
            "result": to_json(result), "report": report_path, "problem": None}


def check_run(table: pa.Table, reports_dir: str | None = None,
              need_report: frozenset = frozenset()) -> pa.Table:
    """applyInArrow over groupBy("run"): one run's rows -> one RESULT_SCHEMA row."""
    run = table.column("run")[0].as_py()
    table = table.filter(pc.greater_equal(table.column("pos"), 0)).sort_by("pos")
    report = os.path.join(reports_dir, run, "report.html") if reports_dir and run in need_report else None
    try:
        ops = [_loads(s) for s in table.column("op").to_pylist()]
        row = _one(run, ops, report)
    except Exception as e:  # noqa: BLE001 - reported by the driver as one line
        row = {f.name: None for f in _RESULT_ARROW}
        row.update(run=run, problem=f"the checker failed: {type(e).__name__}: {' '.join(str(e).split())}")
    return pa.Table.from_pylist([row], schema=_RESULT_ARROW)


def per_run(reports_dir: str | None = None, need_report: frozenset = frozenset()):
    """check_run bound to its report settings, with the type hints Spark reads to pick the Arrow API."""
    def check_one_run(table: pa.Table) -> pa.Table:
        return check_run(table, reports_dir, need_report)
    return check_one_run
