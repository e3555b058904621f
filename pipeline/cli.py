"""`eoslab analyze`, `eoslab sweep` and `eoslab serve`: the command lines of the analysis pipeline.

Guarantees: `analyze` prints one JSON summary on stdout (runs, ops,
invalid_runs, lab_error_runs, cells, master, cores, seconds, ops_per_s, out)
and exits 0; `sweep` prints one JSON summary (done, skipped, lab_errors,
failed, store) and exits 0 when every run completed (anomalies are findings,
not failures), 1 when some run failed or ended in a lab error (the lab broke
it: no verdict about Kafka; a resumed sweep runs it again). Bad input — a missing store, a run without history.jsonl or
run.json, a malformed history line, a bad --master / --conf / settings
matrix — is one line on stderr and exit 2, never a traceback; so is a Spark
that cannot start (no Java) or a job that fails. `serve` (pipeline.serve)
prints its URL and runs until interrupted (exit 0); a path that is not a
store, or an address it cannot listen on, is one line on stderr and exit 2.
"""
from __future__ import annotations

import json
import sys

from eoslab import argtypes


def register(subparsers) -> None:
    a = subparsers.add_parser("analyze", help="Spark job: check every run under STORE, write the anomaly matrix",
                              description="Check every run under STORE on Spark (the same checker as "
                                          "`eoslab check`) and write DIR/matrix.parquet, DIR/matrix.csv, "
                                          "DIR/index.html.")
    a.add_argument("store", metavar="STORE", help="directory of run directories (run.json + history.jsonl each)")
    a.add_argument("--out", required=True, metavar="DIR", help="output directory")
    a.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (default), local[N] or spark://HOST:PORT")
    a.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable), e.g. spark.driver.memory=4g")
    a.add_argument("--write-reports", action="store_true",
                   help="write DIR/reports/<run>/report.html for runs that have no report.html")
    a.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    a.set_defaults(func=run_analyze)

    s = subparsers.add_parser("sweep", help="the chaos runs a settings matrix needs (resumable)",
                              description="Run `eoslab run` for every cell of a settings matrix x fault "
                                          "package x seed, into STORE; runs already there are skipped.")
    s.add_argument("--workload", action="append", required=True, metavar="W",
                   help="workload (repeat, or join with commas, to sweep several: transactional.id is the "
                        "workload's, so --workload queue --workload txn sweeps it)")
    s.add_argument("--nemesis", action="append", required=True, metavar="PACKAGES",
                   help="a fault package (or several joined by commas, played together in one run); "
                        "repeat for each package to sweep against")
    s.add_argument("--settings-matrix", required=True, metavar="FILE",
                   help="JSON or TOML: {\"matrix\": {name: [values]}, \"fixed\": {...}, \"exclude\": [...]}")
    s.add_argument("--seeds", type=argtypes.int_range(1, 1_000_000), required=True, metavar="N",
                   help="seeds per cell: first-seed .. first-seed+N-1")
    s.add_argument("--first-seed", type=argtypes.nonnegative_int, default=0)
    s.add_argument("--time-limit", type=argtypes.float_range(0, 7 * 86400, low_open=True), default=30.0,
                   help="seconds per run (default 30)")
    s.add_argument("--concurrency", type=argtypes.int_range(1, 1000), default=4)
    s.add_argument("--out", required=True, metavar="STORE")
    s.add_argument("--skip-invalid", action="store_true",
                   help="leave out cells `eoslab run` refuses (e.g. acks=1 with enable.idempotence=true)")
    s.add_argument("--kafka-version", default=None, metavar="V",
                   help="the Kafka release of every cell that does not set kafka.version (default 4.0)")
    s.add_argument("--dry-run", action="store_true", help="list the runs, run nothing")
    s.set_defaults(func=run_sweep)

    v = subparsers.add_parser("serve", help="browse a store's runs in a web browser (verdicts, anomalies, reports)",
                              description="Serve a page listing every run of STORE (workload, client, Kafka "
                                          "release, faults, seed, verdict, anomalies; sortable, filterable), "
                                          "linking each run's report and the store's matrix page. The page "
                                          "follows new runs while a sweep writes.")
    v.add_argument("store", metavar="STORE", help="the folder `eoslab sweep --out` or `eoslab run --out` wrote")
    v.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    v.add_argument("--port", type=argtypes.int_range(0, 65535), default=8765,
                   help="port (default 8765; 0 picks a free one); the URL is printed")
    v.add_argument("--refresh", type=argtypes.float_range(0, 3600), default=2.0, metavar="SECONDS",
                   help="how often the page asks for new runs (default 2; 0: never)")
    v.set_defaults(func=run_serve)


def _error(msg: str, code: int = 2):
    from eoslab.cli import CliError
    return CliError(" ".join(str(msg).split()), code)


def _conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise _error(f"--conf {it!r}: expected KEY=VALUE")
        conf[k.strip()] = v
    return conf


def run_analyze(args) -> int:
    from pipeline.store import StoreError
    try:
        from pipeline.job import analyze
        from pipeline.session import SparkStartError, check_master, spark_error
    except ImportError as e:
        raise _error(f"analyze needs PySpark and pyarrow (pip install 'eoslab[spark]'): {e}") from None
    conf = _conf(args.conf)
    try:
        check_master(args.master)
        summary = analyze(args.store, args.out, master=args.master, conf=conf,
                          write_reports=args.write_reports, progress=not args.no_progress, log=sys.stderr)
    except (StoreError, SparkStartError) as e:
        raise _error(e) from None
    except Exception as e:  # noqa: BLE001 - a failed Spark job: its first meaningful line
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise _error(f"the Spark job failed: {spark_error(e)}") from None
        raise
    print(json.dumps(summary), flush=True)
    return 0


def run_sweep(args) -> int:
    from pipeline.sweep import MatrixError, load_matrix, plan, sweep
    try:
        cells = load_matrix(args.settings_matrix)
    except MatrixError as e:
        raise _error(e) from None
    if args.seeds < 1:
        raise _error("--seeds must be at least 1")
    if args.time_limit <= 0:
        raise _error("--time-limit must be positive")
    try:
        workloads = [w.strip() for spec in args.workload for w in spec.split(",") if w.strip()]
        runs = plan(workloads, args.nemesis, cells, range(args.first_seed, args.first_seed + args.seeds),
                    args.out, args.time_limit, args.concurrency, skip_invalid=args.skip_invalid, log=sys.stderr,
                    kafka_version=args.kafka_version)
    except ValueError as e:
        raise _error(e) from None
    if not runs:
        raise _error("every cell was left out; nothing to run")
    if args.dry_run:
        for r in runs:
            print(json.dumps({"out": r.out, "workload": r.workload, "nemesis": r.nemesis, "seed": r.seed,
                              "settings": r.settings}))
        return 0
    summary = sweep(runs, log=sys.stderr)
    print(json.dumps({**summary, "store": args.out}), flush=True)
    return 1 if summary["failed"] or summary["lab_errors"] else 0


def run_serve(args) -> int:
    try:
        from pipeline.serve import NotAStore, serve
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("aiohttp"):
            raise
        raise _error(f"serve needs aiohttp (pip install 'eoslab[serve]'): {e}") from None
    try:
        return serve(args.store, host=args.host, port=args.port, refresh_s=args.refresh)
    except NotAStore as e:
        raise _error(e) from None
    except OSError as e:
        raise _error(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
