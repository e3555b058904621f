"""`eoslab shrink RUN_DIR`: the command line of cluster.shrink (delta debugging of a run's faults and size).

Guarantees: progress lines on stderr, the one-paragraph summary on stdout;
exit 0 when the search ran (OUT/shrink.json, OUT/minimal), 2 with one
line on bad input (cluster.shrink.BadInput) before anything runs.
"""
from __future__ import annotations

import os

from eoslab import argtypes
from eoslab.cli import CliError


def register(sub) -> None:
    from cluster import shrink as sh
    p = sub.add_parser(
        "shrink", help="find a smaller run (fewer faults, shorter, fewer processes and records) that still "
                       "shows an anomalous run's anomaly",
        description="Delta debugging (ddmin) over RUN_DIR's fault schedule (run.json \"schedule\"; each kept "
                    "fault keeps its \"at\" and \"duration\"), then one try with a shorter time limit (the last "
                    f"kept fault's end + {sh.MARGIN_S:g} s), then the run's size, halved toward a floor while it still "
                    "reproduces: its processes (--concurrency; the copier's workload.copiers, the zombie "
                    "workload's workload.slots) and records (workload.max-sends of txn and zombie, the copier's "
                    "workload.input-rate). Each candidate is replayed as `eoslab run "
                    "--schedule` with the run's workload, settings, seed, client and Kafka version, in "
                    "OUT/candidates/NNN, and counts when at least K of N tries show one of the run's anomaly "
                    f"types (default K={sh.DEFAULT_NEED} of N={sh.DEFAULT_TRIES}: timing is not deterministic, "
                    "so one hit is evidence and a miss is not). Writes OUT/minimal (a copy of the smallest "
                    "reproducing run), OUT/schedule.json and OUT/shrink.json (with each size dimension's "
                    "original and minimal value), and prints a summary with the replay command, which carries "
                    "them.",
        epilog="exit status: 0 the search ran (see OUT/shrink.json), 2 bad input (nothing ran)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the folder of an anomalous `eoslab run` (verdict invalid)")
    p.add_argument("--out", help="where candidates and the result go (default RUN_DIR-shrink; must be new or empty)")
    p.add_argument("--tries", type=argtypes.int_range(1, 100), default=sh.DEFAULT_TRIES, metavar="N",
                   help=f"replays per candidate at most (default {sh.DEFAULT_TRIES})")
    p.add_argument("--need", type=argtypes.int_range(1, 100), default=sh.DEFAULT_NEED, metavar="K",
                   help=f"a candidate reproduces when K of its N replays show the anomaly (default {sh.DEFAULT_NEED})")
    p.add_argument("--budget-runs", type=argtypes.int_range(1, 10000), default=sh.DEFAULT_BUDGET_RUNS, metavar="R",
                   help=f"replay runs in all, at most (default {sh.DEFAULT_BUDGET_RUNS})")
    p.add_argument("--budget-minutes", type=argtypes.float_range(0, 7 * 24 * 60, low_open=True), metavar="M",
                   help="no new replay after M minutes (a replay in progress finishes)")
    p.add_argument("--anomaly", action="append", default=[], metavar="TYPE",
                   help="a candidate counts only when it shows this anomaly type (repeatable; the run must show "
                        "it; default: any type the run shows)")
    p.add_argument("--cluster", metavar="NAME",
                   help="replay on this running local cluster (eoslab cluster up) instead of a new one per run")
    p.set_defaults(func=cmd_shrink)


def cmd_shrink(args) -> int:
    from cluster import shrink as sh
    out = args.out or os.path.normpath(args.run_dir) + "-shrink"
    try:
        s = sh.Shrinker(args.run_dir, sh.Options(out=out, tries=args.tries, need=args.need,
                                                 budget_runs=args.budget_runs, budget_minutes=args.budget_minutes,
                                                 cluster=args.cluster, anomalies=args.anomaly))
    except sh.BadInput as e:
        raise CliError(str(e)) from None
    doc = s.shrink()
    print(doc["summary"])
    return 0
