"""`eoslab scenario list | run NAME... | run --all [--out DIR] [--keep]`.

Guarantees: `list` prints one line per scenario: name, expected verdict,
one-line description. `run` plays the named scenarios (or all of them) one
after another, each on its own fresh local cluster, and prints one line per
scenario on stdout — name, expected, observed, MATCH or MISMATCH — with
progress lines on stderr; the files of each are in DIR/NAME
(history.jsonl, results.json, report.html, and logs/ with --keep or when it
did not match). Exit 0 when every scenario matched, 1 when one did not, 2 when
one could not run (or on bad arguments: an unknown name, NAME with --all,
neither; one readable line on stderr).
"""
from __future__ import annotations

import logging
import os
import sys
import time

from eoslab.cli import CliError

DEFAULT_OUT = os.path.join("out", "scenarios")


def register(sub) -> None:
    p = sub.add_parser("scenario", help="deterministic experiments from the seeds, each with an expected verdict",
                       description="Deterministic experiments from the seed articles, judged by the checker.")
    ssub = p.add_subparsers(dest="scenario_command", required=True, parser_class=type(p))
    ls = ssub.add_parser("list", help="name, expected verdict and description of every scenario")
    ls.add_argument("--verbose", "-v", action="store_true", help="also the seed article, the cluster and notes")
    ls.add_argument("--kafka-version", default=None, metavar="V", help="expected verdicts on this Kafka version")
    ls.set_defaults(func=cmd_list)
    run = ssub.add_parser("run", help="run scenarios and compare the checker's verdict with the expected one")
    run.add_argument("names", nargs="*", metavar="NAME", help="scenario names (see `eoslab scenario list`)")
    run.add_argument("--all", action="store_true", help="run every scenario")
    run.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                     help=f"write DIR/NAME/{{history.jsonl,results.json,report.html}} (default: {DEFAULT_OUT})")
    run.add_argument("--kafka-version", default=None, metavar="V",
                     help="cluster and producer behave as this Kafka release (default 4.0); the expected verdict "
                          "is the one for V")
    run.add_argument("--keep", action="store_true",
                     help="keep the nodes' logs in DIR/NAME/logs (always kept when a scenario does not match)")
    run.set_defaults(func=cmd_run)


def cmd_list(args) -> int:
    from cluster.scenarios import scenarios
    all_ = scenarios()
    v = _version(args)
    width = max(len(s.name) for s in all_)
    ewidth = max(len(s.expectation(v)) for s in all_)
    for s in all_:
        print(f"{s.name:<{width}}  {s.expectation(v):<{ewidth}}  {s.description}")
        if args.verbose:
            print(f"{'':<{width}}  seed: {s.seed}; cluster: {s.cluster.describe()}")
            if s.notes:
                print(f"{'':<{width}}  {s.notes}")
    return 0


def _version(args) -> str:
    from eoslab import kafka_version
    try:
        return kafka_version.get(args.kafka_version).name
    except ValueError as e:
        raise CliError(str(e)) from None


def selected(args) -> list:
    from cluster.scenarios import get, scenarios
    if args.all and args.names:
        raise CliError("give scenario names or --all, not both")
    if not args.all and not args.names:
        raise CliError("name a scenario (see `eoslab scenario list`) or give --all")
    if args.all:
        return scenarios()
    out, seen = [], set()
    for n in args.names:
        try:
            sc = get(n)
        except KeyError as e:
            raise CliError(str(e.args[0])) from None
        if n not in seen:
            seen.add(n)
            out.append(sc)
    return out


def cmd_run(args) -> int:
    from cluster.scenarios.runner import run_scenario
    from cluster.zookeeper import ZooKeeperMissing, find_zookeeper_classpath, java_binary
    chosen = selected(args)
    version = _version(args)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise CliError(f"--out {args.out}: exists and is not a directory")
    try:
        find_zookeeper_classpath()
        java_binary()
    except ZooKeeperMissing as e:
        raise CliError(f"scenarios need ZooKeeper and Java: {e}") from None
    for name in ("clients", "services", "kazoo"):   # the clients' retry warnings are not the verdict
        lg = logging.getLogger(name)
        lg.addHandler(logging.NullHandler())
        lg.propagate = False
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    outcomes = []
    for i, sc in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {sc.name}: {sc.cluster.describe()} ...", file=sys.stderr, flush=True)
        o = run_scenario(sc, args.out, keep=args.keep, kafka_version=version)
        outcomes.append(o)
        print(o.line(), flush=True)
    errors = sum(o.error is not None for o in outcomes)
    mismatches = sum(o.error is None and not o.match for o in outcomes)
    print(f"Kafka {version}: {len(outcomes)} scenario(s) in {time.monotonic() - t0:.0f} s: {len(outcomes) - errors - mismatches} "
          f"match, {mismatches} mismatch, {errors} error; files in {args.out}", file=sys.stderr, flush=True)
    return 2 if errors else (1 if mismatches else 0)
