"""The anomaly matrix: per workload x configuration x fault package x Kafka version x client, how often each
anomaly shows.

Guarantees: `aggregate(run_rows)` groups the per-run rows (one dict per run,
as the check stage returns them) and returns plain rows, sorted by
workload, configuration, fault, Kafka version, client, kind and anomaly (in
checker.kafka.check.TYPES_ORDER), one per cell (CELL: runs of two clients
never share a cell; a row without a client is the lab's own, "eoslab") and:
  kind "anomaly": every type the checker can report (zero rows included,
                  so "never in n runs" is in the table), plus any other
                  type found; "unseen" (runs with acknowledged records no
                  poll returned; count = those records) and "(any)" (runs
                  the checker judged invalid);
  kind "allowed": the types found that Kafka's model permits, where found.
Lab errors are counted apart from anomalies and from valid runs: a run whose
verdict is lab-error (the lab broke it, checker.result) counts only in its
cell's `lab_errors` (every row of the cell carries it) and adds nothing else
to the cell, since it says nothing about Kafka; a cell has rows even when
every run of it was a lab error (then runs is 0, rate empty).
Each row: runs (the runs judged), lab_errors, runs_with, rate = runs_with /
runs with its 95% Wilson score interval (ci_low, ci_high), count (findings
over all runs of the cell), ops, per_million_ops, the cell's unseen records, acknowledged
records and their share, latency p50 / p99 / max in ms for sends and polls
(quantiles from summed log-bucket histograms: within a bucket, about 6%;
maxima exact), the worst real-time lag any run of the cell reports
(`max_realtime_lag_ms`: the checker's `realtime_lag.max_ms`; empty when no
run reports one), `client_version` (the versions of the cell's client its
runs recorded, sorted and joined by ", "; empty when none did: a version is
no part of the cell), the settings as JSON and one `setting.<name>` column
per setting found in the store (empty = not set). Columns are COLUMNS plus
those setting columns, in that order.
"""
from __future__ import annotations

import json
import math

from pipeline.latency import bucket_mid_ns
from pipeline.store import DEFAULT_CLIENT

Z95 = 1.959963984540054
CELL = ("workload", "config", "fault", "kafka_version", "client")
UNKNOWN_VERSION = "unknown"
ANY, UNSEEN = "(any)", "unseen"
LAB_ERROR = "lab-error"
COLUMNS = ("workload", "config", "fault", "kafka_version", "client", "client_version", "kind", "anomaly", "runs",
           "lab_errors", "runs_with", "rate", "ci_low", "ci_high", "count", "ops", "per_million_ops", "unseen_records",
           "acked_records", "unseen_share", "send_p50_ms", "send_p99_ms", "send_max_ms", "poll_p50_ms", "poll_p99_ms",
           "poll_max_ms", "max_realtime_lag_ms", "settings")


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (0.0 if k <= 0 else max(0.0, mid - half), 1.0 if k >= n else min(1.0, mid + half))


def quantile_ms(hist: dict[int, int], q: float) -> float | None:
    total = sum(hist.values())
    if not total:
        return None
    need, acc = q * total, 0
    for b in sorted(hist):
        acc += hist[b]
        if acc >= need:
            return bucket_mid_ns(b) / 1e6
    return None  # pragma: no cover - acc reaches total


def _type_order() -> list[str]:
    from checker.kafka.check import TYPES_ORDER
    return [t for t in TYPES_ORDER if t != UNSEEN]


def cell_key(r) -> tuple:
    """A row's cell: (workload, config, fault, kafka_version, client); the version is "unknown" and the
    client the lab's own when absent."""
    return (r["workload"], r["config"], r["fault"], r.get("kafka_version") or UNKNOWN_VERSION,
            r.get("client") or DEFAULT_CLIENT)


def _max(a, b):
    return b if a is None else (a if b is None else max(a, b))


def tables(run_rows) -> tuple[list[dict], list[dict], dict]:
    """What build_rows takes: per cell its totals, per (cell, kind, type) the findings, and the
    summed latency histograms; from one dict per run (valid, verdict, ops, anomaly/allowed counts
    as (type, n) pairs or a dict, unseen, acked, lat_send/lat_poll and their maxima,
    max_realtime_lag_ms). A lab-error run counts in its cell's lab_errors only."""
    cells: dict[tuple, dict] = {}
    found: dict[tuple, list] = {}
    hists: dict[str, dict[tuple, list]] = {"lat_send": {}, "lat_poll": {}}
    for r in run_rows:
        key = cell_key(r)
        c = cells.get(key)
        if c is None:
            c = cells[key] = {**dict(zip(CELL, key)), "runs": 0, "lab_errors": 0, "ops": 0, "invalid": 0,
                              "unseen_records": 0, "runs_unseen": 0, "acked_records": 0, "send_max": None,
                              "poll_max": None, "realtime_lag_max": None, "settings": r["settings"],
                              "client_versions": set()}
        c["settings"] = min(c["settings"], r["settings"])
        if r.get("client_version"):
            c["client_versions"].add(r["client_version"])
        if r.get("verdict") == LAB_ERROR:
            c["lab_errors"] += 1
            continue
        c["runs"] += 1
        c["ops"] += r["ops"] or 0
        c["invalid"] += r["valid"] == "false"
        c["unseen_records"] += r["unseen"] or 0
        c["runs_unseen"] += (r["unseen"] or 0) > 0
        c["acked_records"] += r["acked"] or 0
        c["send_max"] = _max(c["send_max"], r["lat_send_max"])
        c["poll_max"] = _max(c["poll_max"], r["lat_poll_max"])
        c["realtime_lag_max"] = _max(c["realtime_lag_max"], r.get("max_realtime_lag_ms"))
        for kind, col in (("anomaly", "anomaly_counts"), ("allowed", "allowed_counts")):
            counts = r[col] or ()
            for anomaly, n in (counts.items() if isinstance(counts, dict) else counts):
                f = found.setdefault((*key, kind, anomaly), [0, 0])
                f[0] += 1
                f[1] += n
        for name in hists:
            h = r[name]
            if h:
                acc = hists[name].get(key)
                if acc is None:
                    hists[name][key] = list(h)
                else:
                    for b, n in enumerate(h):
                        if n:
                            acc[b] += n
    found_rows = [{**dict(zip(CELL, k[:len(CELL)])), "kind": k[-2], "anomaly": k[-1], "runs_with": v[0],
                   "count": v[1]} for k, v in found.items()]
    hist_rows = {name: [{**dict(zip(CELL, key)), "b": b, "n": n} for key, h in per.items()
                        for b, n in enumerate(h) if n > 0] for name, per in hists.items()}
    return list(cells.values()), found_rows, hist_rows


def _ms(ns) -> float | None:
    return None if ns is None else ns / 1e6


def aggregate(run_rows) -> tuple[list[dict], list[str]]:
    """(rows, column names) of the matrix; see the module docstring."""
    return build_rows(*tables(run_rows))


def build_rows(cells, found, hists) -> tuple[list[dict], list[str]]:
    order = _type_order()
    rank = {t: i for i, t in enumerate(order + [UNSEEN, ANY])}
    by_cell: dict[tuple, dict] = {}
    for r in found:
        by_cell.setdefault(cell_key(r), {})[(r["kind"], r["anomaly"])] = (r["runs_with"], r["count"])
    lat: dict[tuple, dict[str, dict[int, int]]] = {}
    for name, rows in hists.items():
        for r in rows:
            lat.setdefault(cell_key(r), {}).setdefault(name, {})[r["b"]] = r["n"]
    observed = sorted({a for f in by_cell.values() for (k, a) in f if k == "anomaly" and a not in rank})
    setting_names = sorted({k for c in cells for k in json.loads(c["settings"] or "{}")})
    out = []
    for c in sorted(cells, key=cell_key):
        key = cell_key(c)
        f = by_cell.get(key, {})
        settings = json.loads(c["settings"] or "{}")
        h = lat.get(key, {})
        acked = c["acked_records"] or 0
        common = {
            "ops": c["ops"], "unseen_records": c["unseen_records"], "acked_records": acked,
            "unseen_share": (c["unseen_records"] / acked) if acked else None,
            "send_p50_ms": quantile_ms(h.get("lat_send", {}), 0.5),
            "send_p99_ms": quantile_ms(h.get("lat_send", {}), 0.99), "send_max_ms": _ms(c["send_max"]),
            "poll_p50_ms": quantile_ms(h.get("lat_poll", {}), 0.5),
            "poll_p99_ms": quantile_ms(h.get("lat_poll", {}), 0.99), "poll_max_ms": _ms(c["poll_max"]),
            "max_realtime_lag_ms": c.get("realtime_lag_max"),
            "client_version": ", ".join(sorted(c.get("client_versions") or ())),
            "settings": json.dumps(settings, sort_keys=True),
            **{f"setting.{k}": settings.get(k, "") for k in setting_names}}
        lines = [("anomaly", t, *f.get(("anomaly", t), (0, 0))) for t in order + observed]
        lines.append(("anomaly", UNSEEN, c["runs_unseen"], c["unseen_records"]))
        lines.append(("anomaly", ANY, c["invalid"], c["invalid"]))
        lines += [("allowed", a, *v) for (k, a), v in sorted(f.items(), key=lambda kv: rank.get(kv[0][1], 99))
                  if k == "allowed"]
        n = c["runs"]
        for kind, anomaly, runs_with, count in lines:
            lo, hi = wilson(runs_with, n)
            out.append({**dict(zip(CELL, key)), "kind": kind, "anomaly": anomaly, "runs": n,
                        "lab_errors": c.get("lab_errors", 0), "runs_with": runs_with,
                        "rate": runs_with / n if n else None, "ci_low": lo, "ci_high": hi, "count": count,
                        "per_million_ops": (count * 1e6 / c["ops"]) if c["ops"] else None, **common})
    columns = list(COLUMNS) + [f"setting.{k}" for k in setting_names]
    return [{k: r[k] for k in columns} for r in out], columns


def write(rows: list[dict], columns: list[str], parquet_path: str, csv_path: str) -> None:
    """matrix.parquet (one file) and matrix.csv from the driver; the matrix is small."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    types = {"runs": pa.int64(), "lab_errors": pa.int64(), "runs_with": pa.int64(), "count": pa.int64(),
             "ops": pa.int64(),
             "unseen_records": pa.int64(), "acked_records": pa.int64()}
    floats = {"rate", "ci_low", "ci_high", "per_million_ops", "unseen_share", "send_p50_ms", "send_p99_ms",
              "send_max_ms", "poll_p50_ms", "poll_p99_ms", "poll_max_ms", "max_realtime_lag_ms"}
    schema = pa.schema([(c, types.get(c, pa.float64() if c in floats else pa.string())) for c in columns])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, parquet_path)
    pacsv.write_csv(table, csv_path)
