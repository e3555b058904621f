"""`eoslab app run`: the command line of the app harness (cluster.apps.run).

Guarantees: bad arguments (a `--schedule` file cluster.run_schedule refuses
among them) give one readable line and exit 2 before anything
starts; the exit status is `eoslab run`'s (0 valid, 1 invalid, 2 bad input
or an application that exits at start, 3 unknown, 4 lab error).
"""
from __future__ import annotations

import argparse
import os

from eoslab import argtypes, kafka_version
from eoslab.cli import CliError

EPILOG = """exit status:
  0  valid      every input record is in the output exactly once, nothing aborted visible
  1  invalid    anomalies (lost, duplicated, unexpected, reordered, aborted read, hanging transaction)
  2  error      bad arguments, or the application exited at start: nothing judged
  3  unknown    the checker ran out of time
  4  lab-error  the lab itself failed, not the application (results.json "lab_errors" says why)

The environment each instance gets, the faults and the verdict: docs/apps.md."""


def register(subparsers) -> None:
    from cluster.apps.faults import APP_PACKAGES
    app = subparsers.add_parser("app", help="your own exactly-once application under chaos")
    sub = app.add_subparsers(dest="app_command", required=True)     # its parsers are eoslab's (one-line errors)
    r = sub.add_parser("run", help="run N instances of a command against a cluster, break them, judge the output",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--cmd", help="the command that starts one instance (run by /bin/sh); required but with "
                                  "--runtime k8s, where the application's StatefulSet runs it")
    r.add_argument("--instances", type=argtypes.int_range(1, 64), default=3)
    r.add_argument("--input", default="in", metavar="TOPIC", help="input topic (default: in)")
    r.add_argument("--output", default="out", metavar="TOPIC", help="output topic (default: out)")
    r.add_argument("--partitions", type=argtypes.int_range(1, 64), default=3, help="of each topic (default: 3)")
    r.add_argument("--records", type=argtypes.int_range(1, 10_000_000), default=10000,
                   help="input records the lab writes (default: 10000)")
    r.add_argument("--keys", type=argtypes.int_range(1, 1_000_000), default=100,
                   help="distinct record keys (default: 100)")
    r.add_argument("--rate", type=argtypes.float_range(0, 1e6, low_open=True), default=None,
                   help="input records per second (default: all of them over 60%% of the time limit)")
    r.add_argument("--nemesis", default="none",
                   help=f"fault packages, comma separated: app faults {', '.join(APP_PACKAGES)}; "
                        "cluster faults as `eoslab run` (kill-leader, kill-coordinator, partition, ...)")
    r.add_argument("--fault-duration", default="5:15", metavar="MIN:MAX",
                   help="seconds each fault lasts, drawn from the seed (default: 5:15)")
    r.add_argument("--schedule", metavar="FILE",
                   help="play exactly these faults, not the seed's: a JSON list of {\"at\", \"package\", "
                        "\"duration\"} as run.json's \"schedule\" (--nemesis defaults to its packages)")
    r.add_argument("--time-limit", type=argtypes.float_range(0, 86400, low_open=True), default=60.0)
    r.add_argument("--seed", type=argtypes.nonnegative_int, default=0)
    r.add_argument("--kafka-version", default=kafka_version.DEFAULT, metavar="V",
                   help=f"the cluster behaves as this Kafka release: {', '.join(kafka_version.names())}")
    r.add_argument("--runtime", choices=("local", "docker", "k8s"), default="local",
                   help="local: the cluster and the instances are processes here (default); docker: a compose "
                        "cluster and one container per instance on its network; k8s: the pods of --statefulset "
                        "(k8s/apps/; refused for now: the harness does not drive pods yet, docs/apps.md)")
    r.add_argument("--statefulset", metavar="NAME",
                   help="k8s: the StatefulSet whose pods are the instances (k8s/apps/app.yaml: app)")
    r.add_argument("--image", help="docker: the image the instances run in (default: the cluster's eoslab image; "
                                   "it must have your command's interpreter and Kafka client)")
    r.add_argument("--cluster", help="use this running cluster (of --runtime) instead of starting one")
    r.add_argument("--ordered", action="store_true", help="also judge per-key order in the output")
    r.add_argument("--cwd", help="directory the command runs in (default: the current one)")
    r.add_argument("--quiet-s", type=argtypes.positive_float, default=30.0,
                   help="after the heal, output quiet this long means the application is done (default 30)")
    r.add_argument("--drain-timeout", type=argtypes.positive_float, default=120.0,
                   help="the longest wait after the heal for the application to catch up (default 120)")
    r.add_argument("--first-output-s", type=argtypes.positive_float, default=60.0,
                   help="no output this long after the first input is an application error (default 60)")
    r.add_argument("--hang-threshold-s", type=argtypes.positive_float, default=75.0,
                   help="an output LSO behind its high watermark this long is a hanging transaction "
                        "(default 75: Kafka's default transaction timeout, abort interval and a margin)")
    r.add_argument("--out", required=True, metavar="DIR")
    r.set_defaults(func=cmd_app_run)


def _duration(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(":"))
    except ValueError:
        raise CliError(f"--fault-duration expects MIN:MAX seconds, got {text!r}") from None
    if not 0 < lo <= hi:
        raise CliError(f"--fault-duration needs 0 < MIN <= MAX, got {text!r}")
    return lo, hi


def cmd_app_run(args) -> int:
    from cluster.apps.run import AppRunConfig, app_run
    nemesis = [n.strip() for n in args.nemesis.split(",") if n.strip()]
    if args.schedule:
        from cluster import run_schedule
        from cluster.apps.faults import ALL_PACKAGES
        try:
            events = run_schedule.load(args.schedule, args.time_limit, known=ALL_PACKAGES)
        except ValueError as e:
            raise CliError(str(e)) from None
        if nemesis in ([], ["none"]):
            nemesis = run_schedule.packages(events) or ["none"]
    if not args.cmd and args.runtime != "k8s":
        raise CliError("--cmd is required: the command that starts one instance of the application")
    cfg = AppRunConfig(cmd=args.cmd or "", out=args.out, instances=args.instances, records=args.records, keys=args.keys,
                       rate=args.rate, partitions=args.partitions,
                       nemesis=nemesis, schedule_file=args.schedule,
                       time_limit=args.time_limit, seed=args.seed, kafka_version=args.kafka_version,
                       cluster=args.cluster, ordered=args.ordered, input_topic=args.input, output_topic=args.output,
                       cwd=os.path.abspath(args.cwd) if args.cwd else None, quiet_s=args.quiet_s,
                       drain_timeout_s=args.drain_timeout, first_output_s=args.first_output_s,
                       hang_threshold_s=args.hang_threshold_s, fault_duration=_duration(args.fault_duration),
                       runtime=args.runtime, image=args.image, statefulset=args.statefulset)
    try:
        cfg.validate()
    except (ValueError, KeyError) as e:
        raise CliError(str(e).strip("'\"")) from None
    return app_run(cfg)
