"""The ops of one history as Parquet: the table, its columns and the file a task writes.

Guarantees: `columns_table(flat, errors, data)` (and `ops_table(ops, data)`,
the same from a list of op dicts) gives the run's table, OPS_ARROW's
columns, one row per op: the line position `pos`, the op's `index`,
`time`, `process`, `type`, `f`, `error` as typed columns for queries (the
`index` the reader gives: the line's own, or its position among the ops
when it has none), and the op itself as JSON in `op`: the history's line as
written (`lines_column`: from the file's bytes in one buffer); plus the
run's latencies (pipeline.latency). `write_ops(table, ops_dir, run)` writes
OPS_DIR/run=<run, escaped as Spark does (`partition_dir`)>/part-00000.parquet
(Hive layout: `spark.read.parquet(OPS_DIR)` gives the `run` column), whole
or not at all (written aside, then renamed); snappy-compressed (Spark's
default codec), min/max statistics of `pos`, `index` and `time` only.
`read_bytes` gives a history's bytes, gzipped or not. pipeline.executors
runs these on Spark's executors.
"""
from __future__ import annotations

import gzip
import os
from itertools import chain
from operator import itemgetter

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
# Spark's ExternalCatalogUtils.escapePathName: these become %XX in a partition directory's name
_ESCAPE = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
_NONE = type(None)
_FIELDS = itemgetter("index", "process", "type", "f", "time")


def partition_dir(run: str) -> str:
    """The directory name Spark gives partition value `run` of column `run`."""
    return "run=" + "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in run)


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
