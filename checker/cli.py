"""`eoslab check HISTORY`: judge a recorded history and print the verdict.

Guarantees: prints exactly one JSON object on stdout,
`{"verdict": "valid"|"invalid"|"unknown"|"lab-error", "valid": true|false|"unknown",
"anomalies": {...}, "stats": {...}}` (the Kafka model adds "allowed": what it
found that Kafka permits), and exits 0 valid, 1 invalid, 2 bad input (missing
file, malformed line, bad option — one line on stderr naming the line or
option, nothing on stdout), 3 unknown (time limit reached), 4 lab-error: the
run.json beside the history lists lab errors (the lab broke that run, see
checker.result), so the verdict is lab-error whatever was found: "lab_errors"
says why and the anomalies are listed as "unconfirmed", never as anomalies. A history with nothing to check is never valid: the
Kafka model says invalid (Jepsen's empty-transaction-graph), the others
unknown; either way one line on stderr says so. An `ok` send/poll whose value
does not have the contract's shape (checker.kafka) and an index that does not
increase (a duplicate) are bad input. `--model kafka` (default) runs checker.kafka; the other
models run checker.linear's linearizability search from `--initial` (a JSON
literal). `--out DIR` also writes DIR/results.json and DIR/report.html.
An app run's notes on its own client (run.json "client_faults", read from the
brokers while its cluster was up) go into the result again on every re-run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from checker.explain import explain
from checker.history import HistoryError
from eoslab import argtypes
from checker.result import (EXIT_BAD_INPUT, app_run_of, exit_code, hang_threshold_of, lab_errors_of, run_json_of, run_of,
                            to_json, with_verdict, write_results)

FORMATS = ("auto", "jsonl", "edn", "jepsen-log")
EXIT_STATUS = """exit status:
  0  valid      no anomaly
  1  invalid    anomalies found
  2  bad input  a missing file, a malformed line or a bad option: nothing judged
  3  unknown    the time limit was reached
  4  lab-error  run.json beside the history lists lab errors: the lab broke that run, no verdict about Kafka"""
LINEAR_MODELS = ("register", "cas-register", "multi-register", "kv", "set", "queue", "log")
MODELS = ("kafka", "app") + LINEAR_MODELS


def register(subparsers) -> None:
    p = subparsers.add_parser("check", help="check a history: Kafka anomalies or linearizability",
                              description=__doc__.split("\n\n")[0], epilog=EXIT_STATUS,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("history", help="history file (JSONL, Jepsen EDN or Jepsen log; .gz ok)")
    p.add_argument("--format", default="auto", choices=FORMATS, help="history format (default: auto)")
    p.add_argument("--model", default="kafka", choices=MODELS,
                   help="what to check against (default: kafka; app for an `eoslab app run` history, chosen "
                        "by itself when run.json beside the history is an app run's)")
    p.add_argument("--initial", metavar="VALUE", help="initial state as a JSON literal (linearizability models)")
    p.add_argument("--out", metavar="DIR", help="also write DIR/results.json and DIR/report.html")
    p.add_argument("--time-limit", type=argtypes.nonnegative_float, metavar="S",
                   help="give up after S seconds (verdict unknown)")
    p.add_argument("--no-partition", action="store_true",
                   help="linearizability: search the history whole instead of per key (same verdict, slower)")
    p.add_argument("--hang-threshold-s", type=argtypes.positive_float, metavar="S", default=None,
                   help="--model kafka: a partition's LSO standing below its high watermark this long is a "
                        "hanging-transaction (default: run.json's hang_threshold_s, else 900, Kafka's "
                        "transaction.max.timeout.ms)")
    p.add_argument("--strict-unseen", action="store_true",
                   help="kafka: count acknowledged records no poll returned as an anomaly (Jepsen's rule)")
    p.set_defaults(func=run)


def _error(msg: str):
    from eoslab.cli import CliError
    return CliError(" ".join(str(msg).split()), EXIT_BAD_INPUT)


def _initial(text: str | None):
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _error(f"--initial: not a JSON literal ({e.msg}): {text!r}") from None


def _linear(path: str, fmt: str, model: str, initial, time_limit, series, partition=True) -> dict:
    try:
        from checker.linear import check_linearizable
    except ImportError:
        raise _error(f"--model {model}: the linearizability checker (checker.linear) is not available") from None
    try:
        from checker.formats import open_history
        ops = open_history(path, fmt)
    except ImportError:
        from checker.history import read_jsonl
        if not os.path.isfile(path):
            raise HistoryError(f"{path}: no such file") from None
        stream = open(path, encoding="utf-8")
        ops = read_jsonl(stream)
    if series is not None:
        ops = series.tee(ops)
    return check_linearizable(ops, model, initial=initial, time_limit=time_limit, partition=partition)


def run(args) -> int:
    initial = _initial(args.initial)
    if args.model == "kafka" and initial is not None:
        raise _error("--initial applies to the linearizability models, not to --model kafka")
    if args.time_limit is not None and args.time_limit < 0:
        raise _error("--time-limit must be zero or more seconds")
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise _error(f"--out {args.out}: exists and is not a directory")
    series = None
    if args.out:
        from checker.report_series import SeriesCollector
        series = SeriesCollector()
    app = app_run_of(args.history) if args.model in ("kafka", "app") else None
    if args.model == "app" or app is not None:
        return _app(args, app or {})
    try:
        if args.model == "kafka":
            from checker.kafka import check_kafka
            hang = args.hang_threshold_s if args.hang_threshold_s is not None else hang_threshold_of(args.history)
            result = check_kafka(args.history, args.format, time_limit=args.time_limit,
                                 series=series, strict_unseen=args.strict_unseen, hang_threshold_s=hang)
        else:
            result = _linear(args.history, args.format, args.model, initial, args.time_limit, series,
                             partition=not args.no_partition)
    except HistoryError as e:
        raise _error(e) from None
    except ValueError as e:          # unknown model / initial value the model rejects
        raise _error(e) from None
    def report(path: str, result: dict, run: dict) -> None:
        from checker.report import write_report
        what = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in run.items())
        write_report(path, result, series,
                     title=f"{os.path.basename(args.history)} ({args.model})" + (f" — {what}" if what else ""))
    return _finish(args, result, report, lambda r: [n for n in (_lab_errors(r) or _nothing_to_check(r),) if n])


def _lab_ops(path: str) -> list[dict] | None:
    """A lab run's history as plain ops (for the say-why of fenced producers), None when unreadable."""
    import gzip
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return None


def _finish(args, result: dict, report, notes) -> int:
    """The steps every model shares: run.json's run and lab errors into the result, DIR/results.json and
    the report (`report(path, result, run)`) with --out, the stderr notes, the JSON line, the exit code."""
    run = run_of(args.history)
    if run:
        result["run"] = run
    run_json = run_json_of(args.history)
    why = explain(result.get("anomalies") or {}, run_json, ops=_lab_ops(args.history) if run_json else None)
    if why:
        result["why"] = why
    result = with_verdict(result, lab_errors_of(args.history))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        write_results(args.out, result)
        report(os.path.join(args.out, "report.html"), result, run)
    for note in notes(result):
        print(f"eoslab check: {note}", file=sys.stderr, flush=True)
    print(to_json(result), flush=True)
    return exit_code(result)


def _app(args, meta: dict) -> int:
    """An app run's history (checker.kafka.app): the output against the input, from outside the app."""
    from checker.kafka.app import check_app
    hang = args.hang_threshold_s if args.hang_threshold_s is not None else hang_threshold_of(args.history)
    try:
        result = check_app(args.history, ordered=bool(meta.get("ordered")), hang_threshold_s=hang)
    except HistoryError as e:
        raise _error(e) from None
    if meta.get("app_errors"):
        result["app_errors"] = list(meta["app_errors"])
    if meta.get("client_faults"):         # the brokers' count, read while the run's cluster was up
        result["client_faults"] = list(meta["client_faults"])

    def report(path: str, result: dict, run: dict) -> None:
        from checker.report_app import write_app_report
        write_app_report(path, result, args.history,
                         title=f"app run: {meta.get('cmd', os.path.basename(args.history))}")
    return _finish(args, result, report, lambda r: [n for n in (_lab_errors(r),) if n]
                   + [f"application: {e}" for e in r.get("app_errors", [])])


def _lab_errors(result: dict) -> str | None:
    """The stderr line for a run the lab broke (never a verdict about Kafka)."""
    errors = result.get("lab_errors")
    if not errors:
        return None
    first = errors[0]
    where = first.get("node") or first.get("thread") or first.get("process") or ""
    return (f"lab-error: {len(errors)} lab error(s), not a verdict about Kafka; first: {first.get('kind')}"
            + (f" ({where})" if where else "") + f": {first.get('message', '')}")


def _nothing_to_check(result: dict) -> str | None:
    """The stderr line for a history with nothing to check (never reported as valid)."""
    empty = result.get("anomalies", {}).get("empty-transaction-graph")
    if empty:
        return f"not valid: {empty[0]['reason']} (Jepsen's empty-transaction-graph)"
    reason = result.get("stats", {}).get("reason", "")
    if result.get("valid") == "unknown" and reason.startswith("nothing to check"):
        return f"unknown: {reason}"
    return None
