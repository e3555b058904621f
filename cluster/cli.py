"""`eoslab cluster up|status|down`: start, inspect and stop a cluster.

Guarantees: `up` prints one JSON object (name, runtime, bootstrap, nodes) and
returns once the cluster serves; errors are one line on stderr with a
non-zero exit.
"""
from __future__ import annotations

import json
import re

from eoslab.cli import CliError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def register(sub) -> None:
    p = sub.add_parser("cluster", help="start, inspect and stop a cluster")
    csub = p.add_subparsers(dest="cluster_command", required=True, parser_class=type(p))
    up = csub.add_parser("up", help="start a cluster and wait until it serves")
    up.add_argument("--runtime", choices=["local"], default="local")
    up.add_argument("--name", default="default")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--controllers", type=int, default=2)
    up.add_argument("--session-timeout-ms", type=int, default=2000,
                    help="ZooKeeper session timeout of brokers and controllers (the lab's default is small)")
    up.add_argument("--broker-arg", action="append", default=[], metavar="ARG",
                    help="extra flag for every broker, e.g. --broker-arg=--producer-state-batches=5")
    up.set_defaults(func=cmd_up)
    st = csub.add_parser("status", help="show a cluster's nodes")
    st.add_argument("--name", default="default")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    dn = csub.add_parser("down", help="stop a cluster and remove its data")
    dn.add_argument("--name", default="default")
    dn.set_defaults(func=cmd_down)
    register_run(sub)


def register_run(sub) -> None:
    r = sub.add_parser("run", help="a chaos run: workload + nemesis + history + verdict")
    r.add_argument("--workload", required=True)
    r.add_argument("--nemesis", default="none", help="fault packages, comma separated (or none)")
    r.add_argument("--time-limit", type=float, default=30.0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--runtime", default="local")
    r.add_argument("--cluster", help="use this running local cluster instead of starting one")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="producer setting (acks=1), broker flag (broker.producer-state-batches=5) "
                        "or topic config (topic.min.insync.replicas=2)")
    r.add_argument("--concurrency", type=int, default=4)
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
    cfg = RunConfig(workload=args.workload, nemesis=[n.strip() for n in args.nemesis.split(",") if n.strip()],
                    time_limit=args.time_limit, seed=args.seed, out=args.out, runtime=args.runtime,
                    cluster=args.cluster, settings=settings, concurrency=args.concurrency)
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


def _load(name: str):
    from cluster.local import ClusterError, LocalRuntime
    _check_name(name)
    try:
        return LocalRuntime.load(name)
    except ClusterError as e:
        raise CliError(str(e)) from None


def cmd_up(args) -> int:
    from cluster.local import ClusterError, LocalRuntime
    from cluster.zookeeper import ZooKeeperMissing
    _check_name(args.name)
    if not 1 <= args.brokers <= 9 or not 1 <= args.controllers <= 9:
        raise CliError("--brokers and --controllers must be between 1 and 9")
    if args.session_timeout_ms < 400:
        raise CliError("--session-timeout-ms must be at least 400")
    rt = LocalRuntime(args.name, brokers=args.brokers, controllers=args.controllers,
                      broker_args=args.broker_arg, session_timeout_ms=args.session_timeout_ms)
    try:
        info = rt.up()
    except (ClusterError, ZooKeeperMissing) as e:
        raise CliError(str(e)) from None
    d = info.to_dict()
    d["bootstrap_all"] = rt.bootstrap_all()
    d["stop"] = f"eoslab cluster down --name {args.name}"
    print(json.dumps(d))
    return 0


def cmd_status(args) -> int:
    rt = _load(args.name)
    info = rt.info()
    if args.json:
        print(json.dumps(info.to_dict()))
    else:
        print(f"cluster {info.name} ({info.runtime}), bootstrap {info.bootstrap}")
        for n in info.nodes:
            print(f"  {n.name:<14} {n.address:<22} {n.state:<8} pid {n.pid or '-'}")
    return 0


def cmd_down(args) -> int:
    rt = _load(args.name)
    rt.down()
    print(json.dumps({"name": args.name, "stopped": True}))
    return 0
