"""`eoslab analyze STORE --out DIR`: the Spark job from run directories to the anomaly matrix.

Guarantees: with the runs `pipeline.store.find_runs` finds under STORE,
1. check (one Spark stage; runs are dealt to tasks largest first, so tasks
   get similar work): executors read each history once with the checker's
   own reader and, from that one read (pipeline.executors.analyze_run),
   write DIR/ops/run=<id>/part-00000.parquet (Parquet, partitioned by run;
   columns in pipeline.executors.OPS_ARROW; `spark.read.parquet(DIR/ops)`
   reads it with the `run` column) and apply `check_kafka` to its ops: DIR/runs.parquet
   (a directory of Parquet files, one per task) holds one row per run — its
   metadata (workload, config, fault, Kafka version, client and its version,
   seed, settings, report link) and verdict (lab-error for a run whose run.json lists lab errors,
   counted apart: `lab_error_runs` in the summary, `lab_errors` in the
   matrix), counts, latency histograms, the worst real-time lag and the full
   result `eoslab check` would print;
2. aggregate (on the driver, over the per-run rows the tasks return, without
   `result`): DIR/matrix.parquet and DIR/matrix.csv (pipeline.matrix) and
   DIR/index.html (pipeline.html).
The ops move from task to filesystem, never through the JVM or a shuffle,
and the tasks are plain RDD tasks over the run list (no DataFrame rows to
convert): that is most of the job's cost otherwise (docs/analysis.md has the
figures). When the job starts its own session, that is a bare SparkContext
(no Spark SQL state; `spark` may be a SparkSession or a SparkContext) and
Spark's own JVM output goes to DIR/spark.log. A bad input (see pipeline.store; a malformed history line,
named with its run and line) raises StoreError before anything but DIR/ops
is written. Returns a summary dict; prints phase progress on `log`. The
same code runs on local[N] and on a standalone master: paths are absolute,
and on a cluster STORE and DIR must be visible at the same paths to every
worker.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

from pipeline import html, matrix
from pipeline.executors import task_fn
from pipeline.session import Progress, context, start, stop
from pipeline.store import RunInfo, StoreError, find_runs

TASKS_PER_CORE = 4


def deal(runs: list[RunInfo], n: int) -> list[list[RunInfo]]:
    """Runs into n bins of similar total size (largest first, each to the lightest bin)."""
    bins: list[list[RunInfo]] = [[] for _ in range(n)]
    load = [0] * n
    for r in sorted(runs, key=lambda r: (-r.size, r.run)):
        i = min(range(n), key=load.__getitem__)
        bins[i].append(r)
        load[i] += r.size + 1
    return [b for b in bins if b]


def _meta(r: RunInfo, out: str, write_reports: bool) -> dict:
    report = r.report
    if report is None and write_reports:
        report = os.path.join(out, "reports", r.run, "report.html")
    return {"run": r.run, "history": r.history, "workload": r.workload, "fault": r.fault, "config": r.config,
            "kafka_version": r.kafka_version, "client": r.client, "client_version": r.client_version,
            "seed": r.seed, "settings": json.dumps(r.settings, sort_keys=True),
            "dir": r.dir, "report": report}


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
            spark = start(master, conf, jvm_log=os.path.join(out, "spark.log"), write_class_archive=True, sql=False)
            own = True
    try:
        return _job(spark, runs, store, out, write_reports, progress, log, t0, own)
    finally:
        if own:
            stop(spark)


def _count_dirs(path: str) -> int:
    """Runs whose Parquet exists so far (the progress line's count)."""
    try:
        return sum(1 for e in os.scandir(path) if e.name.startswith("run="))
    except OSError:
        return 0


def _job(spark, runs, store, out, write_reports, progress, log, t0, own_session=False) -> dict:
    sc = context(spark)
    par = max(sc.defaultParallelism, 1)
    ops_dir, runs_path = os.path.join(out, "ops"), os.path.join(out, "runs.parquet")
    stage = os.path.join(out, f".runs-{os.getpid()}")
    for p in (ops_dir, runs_path, stage, os.path.join(out, "reports")):
        shutil.rmtree(p, ignore_errors=True)
    os.makedirs(stage)

    bins = deal(runs, min(len(runs), TASKS_PER_CORE * par))
    order = {r.run: i for i, r in enumerate(sorted(runs, key=lambda r: r.run))}
    work = [[(order[r.run], _meta(r, out, write_reports)) for r in b] for b in bins]
    need = frozenset(r.run for r in runs if r.report is None) if write_reports else frozenset()
    # the session's Python workers run only these tasks when the job started it: no pandas for pyarrow there
    fn = task_fn(ops_dir, stage, os.path.join(out, "reports") if write_reports else None, need, no_pandas=own_session)
    try:
        with Progress(spark, "check", log, progress, units=("runs", len(runs), lambda: _count_dirs(ops_dir))):
            rows = sc.parallelize(work, len(work)).flatMap(lambda b: b).mapPartitions(fn).collect()
        got = {r["run"]: r for r in rows}
        bad = sorted((r["run"], r["problem"] or "no result") for r in rows if r["problem"] or r["valid"] is None)
        if bad:
            raise StoreError(f"run {bad[0][0]}: {bad[0][1]}")
        missing = sorted(set(order) - set(got))
        if missing:
            raise StoreError(f"run {missing[0]}: the check stage returned nothing for it")
        os.replace(stage, runs_path)
    finally:
        shutil.rmtree(stage, ignore_errors=True)

    with Progress(spark, "aggregate", log, progress):
        run_rows = sorted(got.values(), key=lambda r: r["run"])
        rows, columns = matrix.aggregate(run_rows)
    matrix.write(rows, columns, os.path.join(out, "matrix.parquet"), os.path.join(out, "matrix.csv"))
    total_ops = sum(r["ops"] or 0 for r in run_rows)
    seconds = time.monotonic() - t0
    summary = {"runs": len(run_rows), "ops": total_ops,
               "invalid_runs": sum(1 for r in run_rows if r["verdict"] == "invalid"),
               "lab_error_runs": sum(1 for r in run_rows if r["verdict"] == matrix.LAB_ERROR),
               "cells": len({matrix.cell_key(r) for r in rows}),
               "master": sc.master, "cores": par, "seconds": round(seconds, 2),
               "ops_per_s": round(total_ops / seconds) if seconds > 0 else None, "out": out}
    html.write_index(os.path.join(out, "index.html"), rows, run_rows, summary, store)
    return summary
