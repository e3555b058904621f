"""What Spark executors run: a run's JSONL into Parquet, and a run's Parquet into its verdict.

Both are `mapInArrow` functions over small rows naming runs; the ops never
travel through the JVM (no row conversion, no shuffle): each task reads and
writes whole runs on the filesystem the driver and executors share.

Guarantees:
- `converter(ops_dir)` returns the function that, for rows (run, history),
  reads each history with `checker.kafka.source.iter_jsonl_dicts` — the
  reader and validation `eoslab check` uses — and writes
  OPS_DIR/run=<run, escaped as Spark does>/part-00000.parquet (Hive
  layout: `spark.read.parquet(OPS_DIR)` gives the `run` column) with one
  row per op: the line position `pos`, the op's `index`, `time`, `process`,
  `type`, `f`, `error` as typed columns for queries, and the op itself as
  JSON in `op`, re-serialised from the dict the checker's reader gave. The
  file appears whole or not at all (written aside, then renamed). It yields
  one STATUS_SCHEMA row per run: its op count and file, or — for a history
  the checker would reject — the checker's one-line message in `problem`
  (and no file).
- `checker_fn(reports_dir, need_report)` returns the function that, for rows
  (run, parquet path), reads the ops back, orders them by `pos`, rebuilds
  the op dicts and calls `checker.kafka.check_kafka` on them — the call
  `eoslab check --model kafka` makes, so the result is the same — and yields
  one RESULT_SCHEMA row per run: the verdict, the anomaly and allowed
  counts, unseen and acknowledged records, the whole result as `eoslab
  check` prints it (`result`), and the latency histograms and maxima of
  pipeline.latency. A checker failure yields the row with `problem` set
  instead of raising. Runs in `need_report` also get
  REPORTS_DIR/<run>/report.html (checker.report, as `eoslab check --out`).
"""
from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

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

STATUS_SCHEMA = "run string, ops long, path string, problem string"
RESULT_SCHEMA = ("run string, valid string, ops long, anomaly_counts map<string,long>, "
                 "allowed_counts map<string,long>, unseen long, acked long, lat_send array<long>, "
                 "lat_poll array<long>, lat_send_max long, lat_poll_max long, result string, "
                 "report string, problem string")
BATCH_ROWS = 65_536
OPS_ARROW = pa.schema([("pos", pa.int64()), ("index", pa.int64()), ("time", pa.int64()),
                       ("process", pa.string()), ("type", pa.string()), ("f", pa.string()),
                       ("error", pa.string()), ("op", pa.string())])
_STATUS_ARROW = pa.schema([("run", pa.string()), ("ops", pa.int64()), ("path", pa.string()),
                           ("problem", pa.string())])
_COUNTS = pa.map_(pa.string(), pa.int64())
_RESULT_ARROW = pa.schema([("run", pa.string()), ("valid", pa.string()), ("ops", pa.int64()),
                           ("anomaly_counts", _COUNTS), ("allowed_counts", _COUNTS),
                           ("unseen", pa.int64()), ("acked", pa.int64()),
                           ("lat_send", pa.list_(pa.int64())), ("lat_poll", pa.list_(pa.int64())),
                           ("lat_send_max", pa.int64()), ("lat_poll_max", pa.int64()),
                           ("result", pa.string()), ("report", pa.string()), ("problem", pa.string())])
# Spark's ExternalCatalogUtils.escapePathName: these become %XX in a partition directory's name
_ESCAPE = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def partition_dir(run: str) -> str:
    """The directory name Spark gives partition value `run` of column `run`."""
    return "run=" + "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in run)


# ---------------------------------------------------------------- JSONL -> Parquet
def _batches(path: str) -> Iterator[pa.RecordBatch]:
    from checker.kafka.source import iter_jsonl_dicts

    cols: list[list] = [[] for _ in OPS_ARROW]
    (c_pos, c_idx, c_time, c_proc, c_type, c_f, c_err, c_op) = cols
    pos = 0
    for d in iter_jsonl_dicts(path):
        tm, p, e, f = d.get("time"), d["process"], d.get("error"), d["f"]
        c_pos.append(pos)
        c_idx.append(d["index"])
        c_time.append(tm if type(tm) is int else (int(tm) if type(tm) is float else None))
        c_proc.append(p if type(p) is str else (str(p) if type(p) is int else _dumps(p)))
        c_type.append(d["type"])
        c_f.append(f if type(f) is str else _dumps(f))
        c_err.append(e if e is None or type(e) is str else _dumps(e))
        c_op.append(_dumps(d))
        pos += 1
        if pos % BATCH_ROWS == 0:
            yield pa.RecordBatch.from_arrays([pa.array(c, type=t.type) for c, t in zip(cols, OPS_ARROW)],
                                             schema=OPS_ARROW)
            for c in cols:
                c.clear()
    if c_pos or pos == 0:
        yield pa.RecordBatch.from_arrays([pa.array(c, type=t.type) for c, t in zip(cols, OPS_ARROW)],
                                         schema=OPS_ARROW)


def convert_run(run: str, history: str, ops_dir: str) -> dict:
    """One run's history -> its Parquet file; the STATUS row."""
    from checker.history import HistoryError

    d = os.path.join(ops_dir, partition_dir(run))
    final = os.path.join(d, "part-00000.parquet")
    tmp = os.path.join(d, f".part-00000.parquet.{os.getpid()}.tmp")
    os.makedirs(d, exist_ok=True)
    n = 0
    try:
        with pq.ParquetWriter(tmp, OPS_ARROW, compression="zstd",
                              use_dictionary=["process", "type", "f", "error"]) as w:
            for b in _batches(history):
                w.write_batch(b)
                n += b.num_rows
    except HistoryError as e:
        os.unlink(tmp)
        return {"run": run, "ops": n, "path": None, "problem": " ".join(str(e).split())}
    os.replace(tmp, final)
    return {"run": run, "ops": n, "path": final, "problem": None}


def converter(ops_dir: str):
    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            d = b.to_pydict()
            rows = [convert_run(run, h, ops_dir) for run, h in zip(d["run"], d["history"])]
            yield pa.RecordBatch.from_pylist(rows, schema=_STATUS_ARROW)
    return convert


# ---------------------------------------------------------------- Parquet -> verdict
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


def check_run(run: str, path: str, report_path: str | None = None) -> dict:
    try:
        table = pq.read_table(path, columns=["pos", "op"]).sort_by("pos")
        ops = [_loads(s) for s in table.column("op").to_pylist()]
        return _one(run, ops, report_path)
    except Exception as e:  # noqa: BLE001 - reported by the driver as one line
        row = {f.name: None for f in _RESULT_ARROW}
        row.update(run=run, problem=f"the checker failed: {type(e).__name__}: {' '.join(str(e).split())}")
        return row


def checker_fn(reports_dir: str | None = None, need_report: frozenset = frozenset()):
    def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            d = b.to_pydict()
            rows = [check_run(run, path, os.path.join(reports_dir, run, "report.html")
                              if reports_dir and run in need_report else None)
                    for run, path in zip(d["run"], d["path"])]
            yield pa.RecordBatch.from_pylist(rows, schema=_RESULT_ARROW)
    return check
