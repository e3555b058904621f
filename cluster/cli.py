"""`eoslab cluster up|status|down`: start, inspect and stop a cluster, on the local or the docker runtime.

Guarantees: `up` prints one JSON object (name, runtime, bootstrap, nodes) and
returns once the cluster serves; with `--runtime auto` it runs on Docker
when an engine answers and the images exist, locally otherwise, and says
which and why on stderr (the probe never hangs). `status` and `down` find
the cluster on whichever runtime has it (`--runtime auto`, their default);
`down` stops it wherever it runs; `status` shows each running broker's
KIP-664 gauges (PartitionsWithLateTransactionsCount,
MaxActiveTransactionDuration), "-" for one that does not answer. Errors are one line on stderr with a
non-zero exit.
"""
from __future__ import annotations

import json
import re

from eoslab import kafka_version
from eoslab import argtypes
from cluster.txn_metrics import transaction_metrics
from eoslab.cli import CliError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def register(sub) -> None:
    p = sub.add_parser("cluster", help="start, inspect and stop a cluster")
    csub = p.add_subparsers(dest="cluster_command", required=True, parser_class=type(p))
    up = csub.add_parser("up", help="start a cluster and wait until it serves")
    up.add_argument("--runtime", choices=["local", "docker", "auto"], default="local",
                    help="auto: docker when an engine answers and the images exist, else local")
    up.add_argument("--name", default="default")
    up.add_argument("--brokers", type=argtypes.int_range(1, 9), default=3)
    up.add_argument("--controllers", type=argtypes.int_range(1, 9), default=2)
    up.add_argument("--txn-coordinators", type=argtypes.int_range(0, 9), default=2)
    up.add_argument("--session-timeout-ms", type=argtypes.int_range(400, 2 ** 31 - 1), default=None,
                    help="ZooKeeper session timeout of brokers and controllers (default: the runtime's, "
                         "2000; on Docker EOSLAB_ZK_SESSION_TIMEOUT_MS when set)")
    up.add_argument("--kafka-version", default=None, metavar="V",
                    help=f"behave as this Kafka release: {', '.join(kafka_version.names())} "
                         f"(default {kafka_version.DEFAULT}); see docs/kafka-versions.md")
    up.add_argument("--broker-arg", action="append", default=[], metavar="ARG",
                    help="extra flag for every broker, e.g. --broker-arg=--producer-state-batches=5")
    up.add_argument("--disk", choices=["plain", "lazy"], default="plain",
                    help="lazy: brokers' and ZooKeeper's data on the lazy filesystem, so runs with --cluster can "
                         "play the disk faults (local or docker runtime, FUSE on this host; docs/lazyfs.md)")
    up.set_defaults(func=cmd_up)
    st = csub.add_parser("status", help="show a cluster's nodes")
    st.add_argument("--name", default="default")
    st.add_argument("--json", action="store_true")
    st.add_argument("--runtime", choices=["local", "docker", "auto"], default="auto")
    st.set_defaults(func=cmd_status)
    dn = csub.add_parser("down", help="stop a cluster and remove its data")
    dn.add_argument("--name", default="default")
    dn.add_argument("--runtime", choices=["local", "docker", "auto"], default="auto")
    dn.add_argument("--orphans", action="store_true",
                    help="instead: stop every local cluster whose owner (a run, a test, a benchmark) died "
                         "without stopping it; clusters made by `cluster up` are never orphans")
    dn.set_defaults(func=cmd_down)
    register_run(sub)
    from cluster import transactions_cli
    transactions_cli.register(sub)


def register_run(sub) -> None:
    from argparse import RawDescriptionHelpFormatter

    from checker.result import EXIT_STATUS_HELP
    r = sub.add_parser("run", help="a chaos run: workload + nemesis + history + verdict", epilog=EXIT_STATUS_HELP,
                       formatter_class=RawDescriptionHelpFormatter)
    r.add_argument("--workload", required=True)
    r.add_argument("--nemesis", default="none", help="fault packages, comma separated (or none)")
    r.add_argument("--time-limit", type=argtypes.float_range(0, 7 * 86400, low_open=True), default=30.0,
                   help="seconds of workload (at most a week)")
    r.add_argument("--seed", type=argtypes.nonnegative_int, default=0)
    r.add_argument("--runtime", default="local",
                   help="local, docker, auto, or k8s (a cluster deployed from k8s/; needs --cluster NAMESPACE)")
    r.add_argument("--cluster", help="use this running cluster instead of starting one (on k8s: its namespace)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="producer setting (acks=1), broker flag (broker.producer-state-batches=5) "
                        "or topic config (topic.min.insync.replicas=2)")
    r.add_argument("--concurrency", type=argtypes.int_range(1, 1000), default=4)
    r.add_argument("--partitions", type=argtypes.int_range(1, 64), default=3,
                   help="partitions of the workload's topics (default 3)")
    r.add_argument("--kafka-version", default=kafka_version.DEFAULT, metavar="V",
                   help=f"cluster and clients behave as this Kafka release: {', '.join(kafka_version.names())}")
    r.add_argument("--client", default="eoslab",
                   help="who sends and polls: eoslab (the lab's client, gRPC), confluent-kafka, kafka-python or "
                        "aiokafka (over the Kafka listeners; settings by Kafka's names with --set)")
    r.add_argument("--schedule", metavar="FILE",
                   help="play exactly these faults, not the seed's: a JSON list of {\"at\", \"package\", "
                        "\"duration\"} as run.json's \"schedule\" (--nemesis defaults to its packages)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from cluster.run import RunConfig, run
    settings = {}
    for it in args.set:
        if "=" not in it:
            raise CliError(f"--set expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        settings[k.strip()] = v.strip()
    nemesis = [n.strip() for n in args.nemesis.split(",") if n.strip()]
    if getattr(args, "schedule", None):
        from cluster import run_schedule
        try:
            events = run_schedule.load(args.schedule, args.time_limit)
        except ValueError as e:
            raise CliError(str(e)) from None
        if nemesis in ([], ["none"]):
            nemesis = run_schedule.packages(events) or ["none"]
    cfg = RunConfig(workload=args.workload, nemesis=nemesis,
                    time_limit=args.time_limit, seed=args.seed, out=args.out, runtime=args.runtime,
                    cluster=args.cluster, settings=settings, concurrency=args.concurrency,
                    partitions=getattr(args, "partitions", 3),
                    kafka_version=args.kafka_version, client=args.client,
                    schedule_file=getattr(args, "schedule", None))
    try:
        cfg.validate()
        if args.cluster:
            _check_name(args.cluster)
        if args.concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
    except ValueError as e:
        raise CliError(str(e)) from None
    return run(cfg)


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise CliError(f"invalid cluster name {name!r} (letters, digits, '.', '_', '-'; up to 63)")


def _errors():
    from cluster.docker_runtime import DockerRuntimeError
    from cluster.local import ClusterError
    from cluster.runtimes import RuntimeChoiceError
    from cluster.zookeeper import ZooKeeperMissing
    return ClusterError, DockerRuntimeError, RuntimeChoiceError, ZooKeeperMissing


def _load(name: str, kind: str = "auto") -> list:
    """The runtimes that have a cluster called `name` (auto: every runtime that has one)."""
    from cluster.docker_runtime import project_for
    from cluster.local import LocalRuntime, default_home
    from cluster.runtimes import existing, open_runtime
    _check_name(name)
    kinds = existing(name) if kind == "auto" else [kind]
    if not kinds:
        raise CliError(f"no local cluster named {name!r} (looked in {default_home()}/clusters), and no docker "
                       f"cluster (compose project {project_for(name)}) on an engine this machine reaches")
    rts = []
    try:
        for k in kinds:
            rt = LocalRuntime.load(name) if k == "local" else open_runtime("docker", name)
            if k == "docker" and not rt.exists() and not rt.lazy_disks():   # mounts of a harness killed in up
                raise CliError(f"no docker cluster named {name!r} (compose project {rt.project})")
            rts.append(rt)
    except _errors() as e:
        raise CliError(str(e).splitlines()[0]) from None
    return rts


def cmd_up(args) -> int:
    import sys

    from cluster.runtimes import choose, open_runtime
    _check_name(args.name)
    if not 1 <= args.brokers <= 9 or not 1 <= args.controllers <= 9 or not 0 <= args.txn_coordinators <= 9:
        raise CliError("--brokers and --controllers must be between 1 and 9, --txn-coordinators between 0 and 9")
    if args.session_timeout_ms is not None and args.session_timeout_ms < 400:
        raise CliError("--session-timeout-ms must be at least 400")
    version = args.kafka_version or kafka_version.DEFAULT
    try:
        kafka_version.get(version)
    except ValueError as e:
        raise CliError(str(e)) from None
    kind = args.runtime
    disk = getattr(args, "disk", "plain")
    try:
        kind, why = choose(args.runtime)
        if args.runtime == "auto":
            print(f"runtime: {kind} ({why})", file=sys.stderr)
        extra = {"disk": disk, **({"standing": True} if kind == "local" else {})}
        if args.session_timeout_ms is not None:
            extra["session_timeout_ms"] = args.session_timeout_ms
        rt = open_runtime(kind, args.name, brokers=args.brokers, controllers=args.controllers,
                          txn_coordinators=args.txn_coordinators, broker_args=args.broker_arg,
                          kafka_version=version, **extra)
        info = rt.up()
    except _errors() as e:
        raise CliError(str(e) if kind == "local" else str(e).splitlines()[0]) from None
    d = info.to_dict()
    d["kafka_version"] = version
    d["disk"] = disk
    d["bootstrap_all"] = rt.bootstrap_all()
    d["stop"] = f"eoslab cluster down --name {args.name}" + (" --runtime docker" if kind == "docker" else "")
    print(json.dumps(d))
    return 0


def cmd_status(args) -> int:
    for rt in _load(args.name, args.runtime):
        try:
            info = rt.info()
        except _errors() as e:
            raise CliError(str(e).splitlines()[0]) from None
        metrics = transaction_metrics(info)
        if args.json:
            d = info.to_dict()
            d["transaction_metrics"] = metrics
            print(json.dumps(d))
        else:
            print(f"cluster {info.name} ({info.runtime}), bootstrap {info.bootstrap}"
                  + (f", kafka_bootstrap {info.kafka_bootstrap}" if info.kafka_bootstrap else ""))
            for n in info.nodes:
                m = metrics.get(n.name)
                extra = "" if n.role != "broker" else "  PartitionsWithLateTransactionsCount " + (
                    "-" if m is None else f"{m['PartitionsWithLateTransactionsCount']}") + \
                    "  MaxActiveTransactionDuration " + ("-" if m is None else f"{m['MaxActiveTransactionDuration']}ms") + \
                    (f" ({m['MaxActiveTransactionPartition']})" if m and m["MaxActiveTransactionPartition"] else "")
                print(f"  {n.name:<18} {n.address:<22} {n.state:<8} pid {n.pid or '-'}{extra}")
    return 0


def cmd_down(args) -> int:
    if args.orphans:
        from cluster import orphans
        print(json.dumps({"orphans_stopped": orphans.reap()}))
        return 0
    for rt in _load(args.name, args.runtime):
        try:
            rt.down()
        except _errors() as e:
            raise CliError(str(e).splitlines()[0]) from None
        print(json.dumps({"name": args.name, "runtime": rt.name, "stopped": True}))
    return 0
