"""`eoslab analyze STORE --out DIR`: the Spark job from run directories to the anomaly matrix.

Guarantees: with the runs `pipeline.store.find_runs` finds under STORE,
1. convert: executors read each history with the checker's own reader and
   write DIR/ops/run=<id>/part-00000.parquet (Parquet, partitioned by run;
   columns in pipeline.executors.OPS_ARROW; `spark.read.parquet(DIR/ops)`
   reads it with the `run` column) — runs are dealt to tasks largest first,
   so tasks get similar work;
2. check: executors read each run's Parquet back and apply `check_kafka` to
   it (pipeline.executors.check_run): DIR/runs.parquet holds one row per
   run — its metadata (workload, config, fault, seed, settings, report link)
   and verdict, counts, latency histograms and the full result `eoslab
   check` would print;
3. aggregate (Spark SQL over DIR/runs.parquet): DIR/matrix.parquet and
   DIR/matrix.csv (pipeline.matrix) and DIR/index.html (pipeline.html).
The ops move from task to filesystem, never through the JVM or a shuffle:
that is most of the job's cost otherwise (docs/analysis.md has the figures).
Spark's own JVM output goes to DIR/spark.log when the job starts its session.
A bad input (see pipeline.store; a malformed history line, named with its
run and line) raises StoreError before anything but DIR/ops is written.
Returns a summary dict; prints phase progress on `log`. The same code runs
on local[N] and on a standalone master: paths are absolute, and on a
cluster STORE and DIR must be visible at the same paths to every worker.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

from pipeline import html, matrix
from pipeline.executors import RESULT_SCHEMA, STATUS_SCHEMA, checker_fn, converter
from pipeline.session import Progress, start
from pipeline.store import RunInfo, StoreError, find_runs

META_SCHEMA = ("run string, workload string, fault string, config string, seed long, settings string, "
               "dir string, report string")


def deal(runs: list[RunInfo], n: int) -> list[list[tuple[str, str]]]:
    """Runs into n bins of similar total size (largest first, each to the lightest bin)."""
    bins: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    load = [0] * n
    for r in sorted(runs, key=lambda r: (-r.size, r.run)):
        i = min(range(n), key=load.__getitem__)
        bins[i].append((r.run, r.history))
        load[i] += r.size + 1
    return [b for b in bins if b]


def _meta_rows(runs: list[RunInfo], out: str, write_reports: bool) -> list[tuple]:
    rows = []
    for r in runs:
        report = r.report
        if report is None and write_reports:
            report = os.path.join(out, "reports", r.run, "report.html")
        rows.append((r.run, r.workload, r.fault, r.config, r.seed, json.dumps(r.settings, sort_keys=True),
                     r.dir, report))
    return rows


def analyze(store: str, out: str, master: str = "local[*]", conf: dict | None = None,
            write_reports: bool = False, progress: bool = True, log=sys.stderr, spark=None) -> dict:
    t0 = time.monotonic()
    store, out = os.path.abspath(store), os.path.abspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise StoreError(f"--out {out}: exists and is not a directory")
    runs = find_runs(store, skip=(out,))
    os.makedirs(out, exist_ok=True)
    own = False
    if spark is None:
        from pyspark.sql import SparkSession
        spark = SparkSession.getActiveSession()     # one already running in this process: use it, keep it
        if spark is None:
            spark = start(master, conf, jvm_log=os.path.join(out, "spark.log"))
            own = True
    try:
        return _job(spark, runs, store, out, write_reports, progress, log, t0)
    finally:
        if own:
            spark.stop()


def _job(spark, runs, store, out, write_reports, progress, log, t0) -> dict:
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    par = max(sc.defaultParallelism, 1)
    n = min(len(runs), max(4 * par, 64))
    spark.conf.set("spark.sql.shuffle.partitions", str(min(n, 8 * par)))
    ops_dir, runs_path = os.path.join(out, "ops"), os.path.join(out, "runs.parquet")
    for p in (ops_dir, runs_path, os.path.join(out, "reports")):
        shutil.rmtree(p, ignore_errors=True)

    bins = deal(runs, n)
    todo = spark.createDataFrame(sc.parallelize(bins, len(bins)).flatMap(lambda b: b), "run string, history string")
    with Progress(spark, "convert", log, progress):
        status = {r["run"]: r for r in todo.mapInArrow(converter(ops_dir), STATUS_SCHEMA).collect()}
    bad = sorted((r["run"], r["problem"]) for r in status.values() if r["problem"])
    if bad:
        raise StoreError(f"run {bad[0][0]}: {bad[0][1]}")
    missing = sorted(set(r.run for r in runs) - set(status))
    if missing:
        raise StoreError(f"run {missing[0]}: the convert stage returned nothing for it")

    need = frozenset(r.run for r in runs if r.report is None) if write_reports else frozenset()
    fn = checker_fn(os.path.join(out, "reports") if write_reports else None, need)
    paths = [[(run, status[run]["path"]) for run, _ in b] for b in bins]
    files = spark.createDataFrame(sc.parallelize(paths, len(paths)).flatMap(lambda b: b), "run string, path string")
    meta = spark.createDataFrame(_meta_rows(runs, out, write_reports), META_SCHEMA)
    results = files.mapInArrow(fn, RESULT_SCHEMA).drop("report")
    with Progress(spark, "check", log, progress):
        meta.join(results, "run", "left").write.mode("overwrite").parquet(runs_path)
    checked = spark.read.parquet(runs_path)
    bad = (checked.where(F.col("problem").isNotNull() | F.col("valid").isNull())
           .select("run", "problem").orderBy("run").limit(1).collect())
    if bad:
        raise StoreError(f"run {bad[0]['run']}: {bad[0]['problem'] or 'no result'}")

    with Progress(spark, "aggregate", log, progress):
        rows, columns = matrix.aggregate(checked)
        run_rows = [r.asDict() for r in checked.select(
            "run", "workload", "fault", "config", "seed", "valid", "ops", "anomaly_counts",
            "allowed_counts", "unseen", "report").orderBy("run").collect()]
    matrix.write(rows, columns, os.path.join(out, "matrix.parquet"), os.path.join(out, "matrix.csv"))
    total_ops = sum(r["ops"] or 0 for r in run_rows)
    seconds = time.monotonic() - t0
    summary = {"runs": len(run_rows), "ops": total_ops,
               "invalid_runs": sum(1 for r in run_rows if r["valid"] == "false"),
               "cells": len({(r["workload"], r["config"], r["fault"]) for r in rows}),
               "master": sc.master, "cores": par, "seconds": round(seconds, 2),
               "ops_per_s": round(total_ops / seconds) if seconds > 0 else None, "out": out}
    html.write_index(os.path.join(out, "index.html"), rows, run_rows, summary, store)
    return summary
