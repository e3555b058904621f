"""Time from `make cluster-up` on Docker (images already built) to every service healthy.

Usage: python bench/cluster_up.py [--rounds 5] [--name bench] [--direct]

Each round: the cluster is taken down (untimed), then the timed part —
`make cluster-up RUNTIME=docker NAME=<name>`, which returns once every
container's healthcheck passes and the cluster serves (an active controller
that sees every broker, every broker listing every broker, both transaction
coordinators answering): Make, the runtime probe, the checks that the SDK,
Compose and the images are current, and DockerRuntime.up(). With --direct
only DockerRuntime.up() is timed. `seconds` is when it returned (every
service answering its probe from the host); `docker_healthy_s` is when
Docker's own healthchecks (every 2-5 s) reported every container healthy,
measured from the same start. Prints one JSON object: every round's figures
and the 1-minute load average before it (the machine may be shared), the
medians, and the target (15 s). Uses its own compose project
(eoslab-<name>, its own subnet and port), so it never touches another
cluster. Images must exist (`make images`); before the rounds (untimed) it
brings them up to date with the sources (`make docker-prereqs`), so no
timed round includes a build.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cluster.docker_runtime import DockerRuntime, project_for  # noqa: E402

TARGET_S = 15.0


def wait_docker_healthy(rt: DockerRuntime, timeout: float = 120) -> dict:
    """Until Docker reports every container with a healthcheck healthy (they run every 2-5 s)."""
    states = {n.name: n.state for n in rt.info().nodes}
    assert all(s == "running" for s in states.values()), states
    deadline = time.monotonic() + timeout
    while True:
        containers = rt._containers()
        pending = []
        for svc, c in containers.items():
            c.reload()
            health = c.attrs["State"].get("Health", {}).get("Status", "healthy")
            assert c.status == "running" and health != "unhealthy", (svc, c.status, health)
            if health != "healthy":
                pending.append(svc)
        if not pending:
            return {"services": len(states), "containers": len(containers)}
        assert time.monotonic() < deadline, f"not healthy after {timeout}s: {pending}"
        time.sleep(0.2)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--name", default="bench", help="cluster name (compose project eoslab-NAME)")
    p.add_argument("--direct", action="store_true", help="time DockerRuntime.up() only, without make")
    a = p.parse_args()
    rt = DockerRuntime(project_for(a.name), cluster_name=a.name, engine_wait=60)
    for image in rt.images:
        if subprocess.run(["/usr/bin/docker", "image", "inspect", image], capture_output=True).returncode != 0:
            print(f"cluster_up: image {image} is missing: run `make images` first", file=sys.stderr)
            return 2
    make_up = ["make", "--no-print-directory", "cluster-up", "RUNTIME=docker", f"NAME={a.name}"]
    if not a.direct:   # untimed: images current with the sources, so no round rebuilds them
        subprocess.run(["make", "--no-print-directory", "docker-prereqs"], cwd=ROOT, capture_output=True, timeout=1800)
    rounds, sizes = [], {}
    try:
        for _ in range(a.rounds):
            DockerRuntime(project_for(a.name), cluster_name=a.name).down()
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            if a.direct:
                rt.up(timeout=180, attempts=1)
            else:
                r = subprocess.run(make_up, cwd=ROOT, capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    print(f"cluster_up: make cluster-up failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
                    return 1
            seconds = time.monotonic() - t0
            sizes = wait_docker_healthy(DockerRuntime(project_for(a.name), cluster_name=a.name))
            rounds.append({"seconds": round(seconds, 2), "docker_healthy_s": round(time.monotonic() - t0, 2),
                           "load1_before": round(load, 1)})
    finally:
        DockerRuntime(project_for(a.name), cluster_name=a.name).down()
        try:
            os.remove(os.path.join(ROOT, f".cluster-{a.name}.json"))
        except FileNotFoundError:
            pass
    med = statistics.median(r["seconds"] for r in rounds)
    med_healthy = statistics.median(r["docker_healthy_s"] for r in rounds)
    print(json.dumps({"bench": "cluster_up", "runtime": "docker", "timed": "DockerRuntime.up()" if a.direct
                      else "make cluster-up RUNTIME=docker", **sizes, "rounds": rounds, "median_s": round(med, 2),
                      "median_docker_healthy_s": round(med_healthy, 2),
                      "target_s": TARGET_S, "within_target": med <= TARGET_S, "cores": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
