"""What Spark executors run: each run's history, parsed once, into its Parquet, its verdict and its row.

One task takes a list of runs (dicts of RUN_META fields) and handles them one
by one on the filesystem the driver and executors share; the ops never travel
through the JVM (no row conversion, no shuffle) and each history is parsed
once for both the Parquet and the check.

Guarantees of `analyze_run(meta, ops_dir, report_path)`:
- `checker.kafka.check_kafka` reads the history as `eoslab check --model
  kafka` reads the file (the same reader, `iter_jsonl_dicts`, through the
  checker's HistorySource over the path, so the result is the same and its
  messages name file and line); while it makes that first pass, each op's
  typed fields are kept aside (in one flat list, not the op dicts); when the
  checker looks back at the ops of its findings, it reads the file again,
  as `eoslab check` does;
- it writes OPS_DIR/run=<run, escaped as Spark does>/part-00000.parquet
  after the check, one row per op, whole or not at all (pipeline.ops_parquet
  has the table's columns and the file's layout, codec and statistics);
- it returns one RUNS_ARROW row: the run's metadata (RUN_META: with its
  Kafka version, client and the client's version), the verdict (`verdict`, with
  run.json's lab errors applied as `eoslab check` applies them, and `lab_errors`,
  their number: a lab-error run has no anomaly counts), the anomaly and allowed counts, unseen and acknowledged records, the worst real-time
  lag the checker reports (`realtime_lag.max_ms`, when it reports one), the
  whole result as `eoslab check` prints it (`result`, with the "run" it
  adds from run.json beside the history), and the latency
  histograms and maxima of pipeline.latency;
- a history the checker's reader rejects gives the row with the reader's
  one-line message in `problem` and no Parquet file; a checker failure gives
  the row with `problem` "the checker failed: ..." instead of raising;
- with `report_path`, REPORTS_DIR/<run>/report.html (checker.report, as
  `eoslab check --out`).
Python's cyclic garbage collector is paused while one run is handled (the op
dicts are many and acyclic; scanning them cost more than parsing) and runs
again between runs. `ops_table(ops, data)` (pipeline.ops_parquet, importable
from here as before) gives the same table and latencies from a list of op
dicts and the file's bytes.

`task_fn(ops_dir, stage_dir, reports_dir, need_report, no_pandas)` is the
function a task runs on its runs: it writes their rows to
STAGE_DIR/part-<first run's position>.parquet and yields them as dicts
without `result` (what the driver aggregates); with `no_pandas`, it first
keeps pyarrow in that worker from importing pandas (`arrow_without_pandas`:
for workers of a session the job owns).
"""
from __future__ import annotations

import gc
import os
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ops_parquet import (BATCH_ROWS, OPS_ARROW, _FIELDS, _row, columns_table, lines_column, ops_table,
                                  partition_dir, read_bytes, write_ops)

__all__ = ["BATCH_ROWS", "OPS_ARROW", "RUN_META", "RUNS_ARROW", "analyze_run", "arrow_without_pandas",
           "columns_table", "lines_column", "ops_table", "partition_dir", "read_bytes", "task_fn", "write_ops",
           "write_rows"]          # the Parquet of ops (pipeline.ops_parquet) is importable from here as before

_COUNTS = pa.map_(pa.string(), pa.int64())
RUN_META = ("run", "workload", "fault", "config", "kafka_version", "client", "client_version", "seed", "settings",
            "dir", "report")
RUNS_ARROW = pa.schema([("run", pa.string()), ("workload", pa.string()), ("fault", pa.string()),
                        ("config", pa.string()), ("kafka_version", pa.string()), ("client", pa.string()),
                        ("client_version", pa.string()), ("seed", pa.int64()),
                        ("settings", pa.string()), ("dir", pa.string()), ("report", pa.string()),
                        ("valid", pa.string()), ("verdict", pa.string()), ("lab_errors", pa.int64()),
                        ("ops", pa.int64()),
                        ("anomaly_counts", _COUNTS), ("allowed_counts", _COUNTS),
                        ("unseen", pa.int64()), ("acked", pa.int64()),
                        ("lat_send", pa.list_(pa.int64())), ("lat_poll", pa.list_(pa.int64())),
                        ("lat_send_max", pa.int64()), ("lat_poll_max", pa.int64()),
                        ("max_realtime_lag_ms", pa.float64()), ("result", pa.string()),
                        ("problem", pa.string())])


# ---------------------------------------------------------------- the run's verdict and row
def _source(path: str):
    """The history at `path` as `eoslab check --model kafka` reads it (the checker's JSONL reader,
    through the checker's own HistorySource, so its messages name file and line), whose first pass
    also keeps, per op, the fields of the Parquet columns (`flat`: `_row`'s values, op after op,
    in one list; `errors`: position ->
    `error`) while the checker reads it: each op dict is touched once, while it is in the cache,
    and freed as the checker goes, as in `eoslab check`. A later pass (the checker's look back at
    the ops of its findings) reads the file again, as `eoslab check` does. A reader error of the
    first pass is kept in `read_error`."""
    from checker.history import HistoryError
    from checker.kafka import HistorySource
    from checker.kafka.source import iter_jsonl_dicts

    class Tapped(HistorySource):
        flat: list | None = None
        errors: dict
        read_error: BaseException | None = None

        def dicts(self):
            if self.flat is not None:
                return iter_jsonl_dicts(self.path)
            self.flat, self.errors = [], {}
            return self._first()

        def _first(self):
            flat, errors, fields = self.flat, self.errors, _FIELDS
            add = flat.extend
            try:
                for d in iter_jsonl_dicts(self.path):
                    try:
                        add(fields(d))
                    except KeyError:
                        add(_row(d))
                    if "error" in d:                # its position: the ops so far, this one included
                        errors[len(flat) // 5 - 1] = d["error"]
                    yield d
            except HistoryError as e:
                self.read_error = e
                raise

    return Tapped(path=path, fmt="jsonl")


def _checked_app(meta: dict, app: dict, report_path: str | None) -> dict:
    """An `eoslab app run`'s history: checker.kafka.app, as `eoslab check` picks it from run.json."""
    from checker.kafka.app import check_app
    from checker.result import hang_threshold_of, lab_errors_of, run_of, to_json, with_verdict
    result = check_app(meta["history"], ordered=bool(app.get("ordered")),
                       hang_threshold_s=hang_threshold_of(meta["history"]))
    if app.get("app_errors"):
        result["app_errors"] = list(app["app_errors"])
    run = run_of(meta["history"])
    if run:
        result["run"] = run
    result = with_verdict(result, lab_errors_of(meta["history"]))
    stats = result["stats"]
    if report_path:
        from checker.report_app import write_app_report
        os.makedirs(os.path.dirname(report_path), exist_ok=True)
        write_app_report(report_path, result, meta["history"], title=f"{meta['run']} (app)")
    lag = (result.get("progress") or {}).get("lag_ms") or {}
    return {"valid": to_json(result["valid"]), "verdict": result["verdict"],
            "lab_errors": len(result.get("lab_errors") or []), "ops": stats["ops"],
            "anomaly_counts": list(stats["anomaly_counts"].items()), "allowed_counts": [],
            "unseen": stats.get("anomaly_counts", {}).get("unprocessed", 0), "acked": stats["input_acknowledged"],
            "max_realtime_lag_ms": None if lag.get("max") is None else float(lag["max"]),
            "result": to_json(result), "problem": None}


def _checked(meta: dict, src, report_path: str | None) -> dict:
    from checker.kafka import check_kafka
    from checker.explain import explain
    from checker.result import app_run_of, lab_errors_of, run_json_of, run_of, to_json, with_verdict

    app = app_run_of(meta["history"])
    if app is not None:
        return _checked_app(meta, app, report_path)

    series = None
    if report_path:
        from checker.report_series import SeriesCollector
        series = SeriesCollector()
    result = check_kafka(src, series=series)
    run = run_of(meta["history"])
    if run:                                     # as `eoslab check` adds it from run.json
        result["run"] = run
    why = explain(result.get("anomalies") or {}, run_json_of(meta["history"]))
    if why:
        result["why"] = why
    result = with_verdict(result, lab_errors_of(meta["history"]))
    stats = result["stats"]
    if report_path:
        from checker.report import write_report
        os.makedirs(os.path.dirname(report_path), exist_ok=True)
        what = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in run.items())
        write_report(report_path, result, series, title=f"{meta['run']} (kafka)" + (f" — {what}" if what else ""))
    lag = (result.get("realtime_lag") or {}).get("max_ms")
    return {"valid": to_json(result["valid"]), "verdict": result["verdict"],
            "lab_errors": len(result.get("lab_errors") or []), "ops": stats["ops"],
            "anomaly_counts": list(stats["anomaly_counts"].items()),
            "allowed_counts": list(stats["allowed_counts"].items()),
            "unseen": stats["unseen"]["count"], "acked": stats["records"]["acked"],
            "max_realtime_lag_ms": None if lag is None else float(lag),
            "result": to_json(result), "problem": None}


def _empty_row(meta: dict) -> dict:
    row = {f.name: None for f in RUNS_ARROW}
    row.update({k: meta.get(k) for k in RUN_META})
    return row


def analyze_run(meta: dict, ops_dir: str, report_path: str | None = None) -> dict:
    """One run, end to end on this executor; see the module docstring."""
    from checker.history import HistoryError

    row = _empty_row(meta)
    enabled = gc.isenabled()
    gc.disable()
    try:
        src = _source(meta["history"])
        try:
            checked = _checked(meta, src, report_path)
            if src.flat is None or len(src.flat) != 5 * checked["ops"]:     # the checker read no whole pass
                from checker.kafka.source import iter_jsonl_dicts
                src.flat, src.errors = [], {}
                for i, d in enumerate(iter_jsonl_dicts(meta["history"])):
                    src.flat.extend(_row(d))
                    if "error" in d:
                        src.errors[i] = d["error"]
            table, (send, poll, smax, pmax) = columns_table(src.flat, src.errors, read_bytes(meta["history"]))
            src.flat = None
            write_ops(table, ops_dir, meta["run"])
            del table
            row.update(checked)
            row.update(lat_send=send, lat_poll=poll, lat_send_max=smax, lat_poll_max=pmax)
        except HistoryError as e:
            if e is not src.read_error:
                raise
            row["problem"] = " ".join(str(e).split())
        return row
    except Exception as e:  # noqa: BLE001 - reported by the driver as one line
        row = _empty_row(meta)
        row["problem"] = f"the checker failed: {type(e).__name__}: {' '.join(str(e).split())}"
        return row
    finally:
        if enabled:
            gc.enable()


def write_rows(rows: list[dict], path: str) -> None:
    """RUNS_ARROW rows into one Parquet file, written aside and renamed."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=RUNS_ARROW), tmp, compression="zstd")
    os.replace(tmp, path)


class _NoPandas:
    """A finder under which `import pandas` fails (see arrow_without_pandas)."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ImportError("pandas is not needed by this process")
        return None


def arrow_without_pandas() -> bool:
    """Make pyarrow, in this process, stop looking for pandas: the first time pyarrow converts
    anything (`pa.array`) it imports pandas to learn whether the values are pandas objects, and
    that import is most of a Python worker's start-up CPU (about a CPU-second), for nothing: no
    pandas object comes near this module. Its one probe is made to fail here, and pyarrow keeps
    that answer for the life of the process (`pa.lib._pandas_api.have_pandas` False); `import
    pandas` itself works as before. Only for processes that run nothing else with pyarrow and
    pandas together: the Python workers of a session `eoslab analyze` started itself. False
    (nothing done) when pandas is already imported."""
    import sys

    if "pandas" in sys.modules:
        return False
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])                           # pyarrow's probe, failing once and for good
    finally:
        sys.meta_path.remove(finder)
    return True


def task_fn(ops_dir: str, stage_dir: str, reports_dir: str | None = None, need_report: frozenset = frozenset(),
            no_pandas: bool = False):
    def task(items: Iterable[tuple[int, dict]]) -> Iterator[dict]:
        if no_pandas:
            arrow_without_pandas()
        rows, first = [], None
        for pos, meta in items:
            first = pos if first is None else first
            report = (os.path.join(reports_dir, meta["run"], "report.html")
                      if reports_dir and meta["run"] in need_report else None)
            rows.append(analyze_run(meta, ops_dir, report))
        if rows:
            write_rows(rows, os.path.join(stage_dir, f"part-{first:05d}.parquet"))
        for r in rows:
            r.pop("result", None)
            yield r
    return task
