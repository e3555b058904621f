"""Time from cluster-up on Docker (images already built) to every service healthy.

Usage: python bench/cluster_up.py [--rounds 3] [--project eoslab-bench]

Each round: `compose down -v` (untimed), then the timed part — `compose up
-d --wait` through DockerRuntime.up(), which returns once ZooKeeper, the
controllers, the brokers and every sidecar report healthy (a broker is
healthy once it answers Metadata and knows itself live). Prints one JSON
object: every round's seconds, the median, the 1-minute load average before
each round (the machine may be shared), and the target (15 s). Uses its own
compose project, subnet and bootstrap port, so it never touches a running
`make cluster-up` cluster.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.docker_runtime import DockerRuntime  # noqa: E402

TARGET_S = 15.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--project", default="eoslab-bench")
    a = p.parse_args()
    rt = DockerRuntime(project=a.project, engine_wait=60)
    rounds = []
    try:
        for _ in range(a.rounds):
            rt.down()
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            info = rt.up(timeout=180)
            seconds = time.monotonic() - t0
            states = {n.name: n.state for n in info.nodes}
            assert all(s == "running" for s in states.values()), states
            rounds.append({"seconds": round(seconds, 2), "load1_before": round(load, 1)})
    finally:
        rt.down()
    med = statistics.median(r["seconds"] for r in rounds)
    print(json.dumps({"bench": "cluster_up", "runtime": "docker", "services": 6 + 5, "containers": 16,
                      "rounds": rounds, "median_s": round(med, 2), "target_s": TARGET_S,
                      "within_target": med <= TARGET_S, "cores": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
