"""What history recording costs a chaos run: client ops/s of the `queue` workload with and without it.

Usage: python bench/recording.py [--seconds 60] [--rounds 2] [--concurrency 4] [--out FILE.json]

Starts one local cluster (ZooKeeper, 2 controllers, 3 brokers, RF 3), then
runs the queue workload (the same class `eoslab run --workload queue` uses,
no faults) for --seconds, alternately with recording (cluster.history.History
writing history.jsonl: one JSON line per op, flushed as written) and without
(a recorder that keeps only the op counts), swapping the order each round so
neither side always runs on a warmer cluster. Each run gets its own topic.
Prints completed client ops/s per run, the medians and the cost of recording
(1 - with/without); the issue's target is a cost under 5%.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.history import History  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402
from cluster.workloads.queue import QueueWorkload  # noqa: E402


class CountingRecorder:
    """The baseline: the recorder's interface, keeping nothing but the counts."""

    def __init__(self):
        self.counts = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}

    def invoke(self, process, f, value, **extra):
        self.counts["invoke"] += 1

    def complete(self, process, type_, f, value, **extra):
        self.counts[type_] += 1

    def nemesis(self, f, value, result=None):
        pass

    @property
    def size(self) -> int:
        return sum(self.counts.values())

    def close(self) -> None:
        pass


def one_run(boot: str, recorder, topic: str, seconds: float, concurrency: int, seed: int) -> float:
    wl = QueueWorkload(boot, recorder, seed, topic=topic, partitions=3, concurrency=concurrency,
                       replication_factor=3)
    wl.setup()
    before = recorder.counts["ok"] + recorder.counts["fail"] + recorder.counts["info"]
    t0 = time.monotonic()
    wl.start()
    while time.monotonic() - t0 < seconds:
        time.sleep(0.5)
        done = recorder.counts["ok"] + recorder.counts["fail"] + recorder.counts["info"] - before
        print(f"\r  {time.monotonic() - t0:5.1f}/{seconds:.0f}s  {done} ops", end="", file=sys.stderr, flush=True)
    wl.halt()
    elapsed = time.monotonic() - t0
    print(file=sys.stderr)
    return (recorder.counts["ok"] + recorder.counts["fail"] + recorder.counts["info"] - before) / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", help="also write the figures as JSON here")
    a = ap.parse_args()
    if a.seconds <= 0 or a.rounds <= 0 or a.concurrency <= 0:
        print("recording.py: --seconds, --rounds and --concurrency must be positive", file=sys.stderr)
        return 2
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rt = LocalRuntime("bench-recording", home=home, brokers=3, controllers=2)
    print("starting a local cluster (ZooKeeper, 2 controllers, 3 brokers)...", file=sys.stderr)
    rt.up()
    rates: dict[str, list[float]] = {"with": [], "without": []}
    try:
        boot = rt.bootstrap_all()
        n = 0
        for r in range(a.rounds):
            order = ("with", "without") if r % 2 == 0 else ("without", "with")
            for side in order:
                n += 1
                print(f"round {r + 1}/{a.rounds}: {side} recording", file=sys.stderr)
                if side == "with":
                    rec = History(os.path.join(home, f"history-{n}.jsonl"))
                else:
                    rec = CountingRecorder()
                try:
                    rates[side].append(one_run(boot, rec, f"bench-{n}", a.seconds, a.concurrency, seed=n))
                finally:
                    rec.close()
                print(f"  {side}: {rates[side][-1]:,.0f} ops/s", file=sys.stderr)
    finally:
        rt.down()
    w, wo = statistics.median(rates["with"]), statistics.median(rates["without"])
    result = {"seconds": a.seconds, "rounds": a.rounds, "concurrency": a.concurrency,
              "with_ops_per_s": rates["with"], "without_ops_per_s": rates["without"],
              "median_with": w, "median_without": wo, "cost": 1 - w / wo if wo else None}
    print(f"with recording:    {w:,.0f} ops/s (median of {a.rounds})")
    print(f"without recording: {wo:,.0f} ops/s")
    print(f"cost of recording: {100 * result['cost']:.1f}%  (target < 5%)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
