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
  (Hive layout: `spark.read.parquet(OPS_DIR)` gives the `run` column) with one
  row per op: the line position `pos`, the op's `index`, `time`, `process`,
  `type`, `f`, `error` as typed columns for queries (the `index` the reader
  gives: the line's own, or its position among the ops when it has none),
  and the op itself as JSON in `op`: the history's line as written. The
  file appears whole or not at all (written aside, then renamed), after
  the check; snappy-compressed (Spark's default codec), min/max statistics
  of `pos`, `index` and `time` only; the `op` column comes from the file's
  bytes in one buffer;
- it returns one RUNS_ARROW row: the run's metadata, the verdict (`verdict`, with
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
again between runs. `ops_table(ops, data)` gives the same table and
latencies from a list of op dicts and the file's bytes.

`task_fn(ops_dir, stage_dir, reports_dir, need_report, no_pandas)` is the
function a task runs on its runs: it writes their rows to
STAGE_DIR/part-<first run's position>.parquet and yields them as dicts
without `result` (what the driver aggregates); with `no_pandas`, it first
keeps pyarrow in that worker from importing pandas (`arrow_without_pandas`:
for workers of a session the job owns).
"""
from __future__ import annotations

import gc
import gzip
import os
from itertools import chain
from operator import itemgetter
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.latency import latencies, latencies_columns

try:
    import orjson as _orjson

    def _dumps(d) -> str:
        return _orjson.dumps(d).decode()
except ImportError:  # pragma: no cover - depends on the environment
    import json as _json

    def _dumps(d) -> str:
        return _json.dumps(d, separators=(",", ":"))

BATCH_ROWS = 65_536
OPS_ARROW = pa.schema([("pos", pa.int64()), ("index", pa.int64()), ("time", pa.int64()),
                       ("process", pa.string()), ("type", pa.string()), ("f", pa.string()),
                       ("error", pa.string()), ("op", pa.string())])
# min/max only of the number columns: the strings' cost a tenth of the write and say little (Spark
# filters those dictionary-encoded columns through their dictionaries); the `op` column's none at all
_STATS = ["pos", "index", "time"]
_COUNTS = pa.map_(pa.string(), pa.int64())
RUN_META = ("run", "workload", "fault", "config", "kafka_version", "seed", "settings", "dir", "report")
RUNS_ARROW = pa.schema([("run", pa.string()), ("workload", pa.string()), ("fault", pa.string()),
                        ("config", pa.string()), ("kafka_version", pa.string()), ("seed", pa.int64()),
                        ("settings", pa.string()), ("dir", pa.string()), ("report", pa.string()),
                        ("valid", pa.string()), ("verdict", pa.string()), ("lab_errors", pa.int64()),
                        ("ops", pa.int64()),
                        ("anomaly_counts", _COUNTS), ("allowed_counts", _COUNTS),
                        ("unseen", pa.int64()), ("acked", pa.int64()),
                        ("lat_send", pa.list_(pa.int64())), ("lat_poll", pa.list_(pa.int64())),
                        ("lat_send_max", pa.int64()), ("lat_poll_max", pa.int64()),
                        ("max_realtime_lag_ms", pa.float64()), ("result", pa.string()),
                        ("problem", pa.string())])
# Spark's ExternalCatalogUtils.escapePathName: these become %XX in a partition directory's name
_ESCAPE = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
_NONE = type(None)
_FIELDS = itemgetter("index", "process", "type", "f", "time")


def partition_dir(run: str) -> str:
    """The directory name Spark gives partition value `run` of column `run`."""
    return "run=" + "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in run)


# ---------------------------------------------------------------- one read of a history
def read_bytes(path: str) -> bytes:
    """The history file's bytes (uncompressed)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return fh.read()


def lines_column(data: bytes, n: int) -> pa.Array:
    """The n ops' lines of `data` (the history's bytes: lines split at b"\\n", as the reader splits
    them) as one string array, each line as written without its newline. When every line is an
    op (no blank lines), Arrow takes the bytes without the newlines as one buffer and the offsets
    from where the newlines were, with no Python object per line; otherwise the blank lines are
    dropped one by one. The reader has decoded every op line as JSON, so they are valid UTF-8."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    if data and data[-1] != 10:
        ends = np.append(ends, len(data))
    if len(ends) == n and len(data) < 2 ** 31:
        offsets = np.empty(n + 1, dtype=np.int32)
        offsets[0] = 0
        offsets[1:] = ends - np.arange(n)
        body = pa.py_buffer(data.replace(b"\n", b""))
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), body)
    lines = [ln for ln in data.split(b"\n") if ln.strip()]
    return pa.array(lines, pa.binary()).cast(pa.string())


def _strings(values) -> list:
    """A column of str or None; other JSON values as JSON (numbers too)."""
    return [v if v is None or type(v) is str else _dumps(v) for v in values]


def _row(d: dict) -> tuple:
    """index, process, type, f and time of one op (time None when it has none)."""
    try:
        return _FIELDS(d)
    except KeyError:
        return d["index"], d["process"], d["type"], d["f"], d.get("time")


def ops_table(ops: list[dict], data: bytes) -> tuple[pa.Table, tuple]:
    """columns_table for a list of op dicts (as the checker's reader gives them)."""
    flat = list(chain.from_iterable(map(_row, ops)))
    errors = {i: d["error"] for i, d in enumerate(ops) if "error" in d}
    return columns_table(flat, errors, data)


def columns_table(flat: list, errors: dict[int, object], data: bytes) -> tuple[pa.Table, tuple]:
    """The run's Parquet table (OPS_ARROW's columns; `process`, `type` and `f` dictionary-encoded
    when their values allow, strings once written) and its latencies (pipeline.latency), from the ops'
    fields one op after the other in one list (`_row`'s five values per op: a slice of every
    fifth gives a column), their `error` values by position (ops without one: None) and the
    history's bytes (the `op` column)."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(flat) // 5
    index, procs, types, fs, times = (flat[i::5] for i in range(5))
    try:                                        # the reader made every index an int
        index_col = pa.array(np.fromiter(index, np.int64, n))
    except OverflowError:                       # an index beyond int64: Arrow says which
        index_col = pa.array(index, pa.int64())

    time_types = set(map(type, times))
    if time_types <= {int}:
        tarr = np.fromiter(times, np.int64, n)
        time_col = pa.array(tarr)
    elif time_types <= {int, _NONE}:
        time_col = pa.array(times, pa.int64())
        tarr = time_col.fill_null(0).to_numpy()
    else:                                       # floats are truncated, other values dropped
        time_col = pa.array([t if type(t) is int else (int(t) if type(t) is float else None) for t in times],
                            pa.int64())
        tarr = None
    proc_types = set(map(type, procs))
    if proc_types <= {int, str}:
        uniq = {p: i for i, p in enumerate(set(procs))}
        codes = np.fromiter(map(uniq.__getitem__, procs), dtype=np.int32, count=n)
        names = [p if type(p) is str else str(p) for p in uniq]
        proc_col = _dictionary(codes, names)
    else:
        codes = None
        proc_col = pa.array([p if type(p) is str else (str(p) if type(p) is int else _dumps(p)) for p in procs],
                            pa.string())
    tu = {t: i for i, t in enumerate(set(types))}      # the reader let only TYPES' strings through
    tcodes = np.fromiter(map(tu.__getitem__, types), dtype=np.int32, count=n)
    type_col = _dictionary(tcodes, list(tu))
    try:
        fu = {f: i for i, f in enumerate(set(fs))}
    except TypeError:                           # a list or an object: not hashable
        fu = None
    f_str = fu is not None and all(type(f) is str for f in fu)     # then every f is a str
    if f_str:
        fcodes = np.fromiter(map(fu.__getitem__, fs), dtype=np.int32, count=n)
        f_col = _dictionary(fcodes, list(fu))
    else:
        f_col = pa.array(_strings(fs), pa.string())
    if errors:
        err = [None] * n
        for i, e in errors.items():
            err[i] = e if e is None or type(e) is str else _dumps(e)
        err_col = pa.array(err, pa.string())
    else:
        err_col = pa.nulls(n, pa.string())
    table = pa.Table.from_arrays([pa.array(np.arange(n, dtype=np.int64)), index_col, time_col,
                                  proc_col, type_col, f_col, err_col, lines_column(data, n)], names=OPS_ARROW.names)

    if codes is not None and tarr is not None and f_str:
        keep = pc.is_valid(time_col).to_numpy(zero_copy_only=False)
        if "nemesis" in uniq:                   # codes are per value: 1 and "1" are two processes
            keep &= codes != uniq["nemesis"]
        fkind = np.array([0 if f in ("send", "txn") else 1 if f == "poll" else 2 for f in fu], dtype=np.int8)
        lat = latencies_columns(codes, tarr, tcodes == tu.get("invoke", -1), fkind[fcodes], keep)
    else:                                       # odd shapes: the plain loop
        lat = latencies([{"process": p, "type": ty, "f": f, "time": t}
                         for p, ty, f, t in zip(procs, types, fs, times)])
    return table, lat


def _dictionary(codes, values: list) -> pa.Array:
    """A string column from per-op codes into `values`: dictionary-encoded, so that the Parquet
    writer takes the dictionary as it is instead of hashing every op's string again; as plain
    strings when two values are the same text (a process 1 beside a process "1")."""
    names = pa.array(values, pa.string())
    if len(set(values)) < len(values):
        import pyarrow.compute as pc
        return pc.take(names, pa.array(codes))
    return pa.DictionaryArray.from_arrays(pa.array(codes), names)


def write_ops(table: pa.Table, ops_dir: str, run: str) -> str:
    """The run's table as DIR/run=<run>/part-00000.parquet, whole or not at all. Snappy, as Spark
    writes Parquet by default. No Arrow schema in the file (`store_schema=False`): its Parquet
    schema alone says what OPS_ARROW says, so dictionary-encoded columns read back as strings."""
    d = os.path.join(ops_dir, partition_dir(run))
    final = os.path.join(d, "part-00000.parquet")
    tmp = os.path.join(d, f".part-00000.parquet.{os.getpid()}.tmp")
    os.makedirs(d, exist_ok=True)
    pq.write_table(table, tmp, compression="snappy", row_group_size=BATCH_ROWS, store_schema=False,
                   use_dictionary=["process", "type", "f", "error"], write_statistics=_STATS)
    os.replace(tmp, final)
    return final


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


def _checked(meta: dict, src, report_path: str | None) -> dict:
    from checker.kafka import check_kafka
    from checker.result import lab_errors_of, run_of, to_json, with_verdict

    series = None
    if report_path:
        from checker.report_series import SeriesCollector
        series = SeriesCollector()
    result = check_kafka(src, series=series)
    run = run_of(meta["history"])
    if run:                                     # as `eoslab check` adds it from run.json
        result["run"] = run
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
