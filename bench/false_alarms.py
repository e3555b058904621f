"""False alarms under load: the safe configurations over every fault package, with the machine busy.

Usage: python bench/false_alarms.py [--runs 100] [--cpu-hogs N] [--neighbour] [--time-limit 15]
                                    [--session-timeout-ms MS] [--out DIR] [--packages a,b,...]
                                    [--kafka-default-flush]

Runs `eoslab run` one after another, each with its own seed: the queue workload
(acks=all, idempotent: the lab client's defaults) and the txn workload
(transactional, read_committed), alternating, over every fault package in turn
(cluster.nemesis.PACKAGES, or the ones given). Meanwhile `--cpu-hogs N` busy
processes (default: twice the cores) share the machine, and with `--neighbour`
another local cluster runs beside the runs with an idempotent producer writing to
it for the whole time. `--session-timeout-ms` sets the ZooKeeper session of every
service of each run (default: the services' own).

A disk package (cluster.nemesis_disk: a power loss that drops what was not
fsynced) is played with the brokers fsyncing every append
(`broker.flush-messages=1`): under Kafka's default flush, which never fsyncs,
a correlated power loss of every replica loses acknowledged records in Kafka
too, so that is not a safe configuration. `--kafka-default-flush` plays them
under Kafka's default instead; their runs are then labelled `default flush`
in the table, and their anomalies are expected, not false alarms.

Every run of a safe configuration must end valid: an anomaly here is a false
alarm (or a real bug), and a lab error is the lab failing, not Kafka. Each run's
verdict comes from its results.json (`verdict`, `lab_errors`), or from the exit
status when there is none (0 valid, 1 anomalies, anything else a lab error). The
table at the end counts valid / anomalies / lab errors per package and lists the
reason of every lab error and the anomaly types of every invalid run; the same
goes to DIR/summary.json. (A live broker declared dead under a short session is
measured by bench/failover.py --cpu-hogs.)
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SAFE = {
    "queue": [],                                            # acks=all, enable.idempotence=true by default
    "txn": ["--set", "isolation.level=read_committed"],
}


def hog(stop: multiprocessing.Event) -> None:     # one core's worth of someone else's work
    while not stop.is_set():
        sum(i * i for i in range(10000))


def neighbour(stop: threading.Event, notes: dict) -> None:
    """Another cluster on this machine, written to for the whole measurement."""
    from clients.admin import create_topic
    from clients.metadata import ClusterMetadata
    from clients.producer import KafkaProducer, ProducerConfig
    from cluster.local import LocalRuntime
    rt = LocalRuntime(f"neighbour-{os.getpid()}", brokers=3, controllers=1, txn_coordinators=0)
    rt.up()
    try:
        boot = rt.bootstrap_all()
        md = ClusterMetadata(boot)
        create_topic(md, "load", partitions=3, replication_factor=3)
        md.close()
        p = KafkaProducer(boot, ProducerConfig(linger_ms=5))
        n = 0
        while not stop.is_set():
            futs = [p.send("load", b"%d" % (n + i)) for i in range(200)]
            for f in futs:
                try:
                    f.result(timeout=60)
                    n += 1
                except Exception:  # noqa: BLE001 - the neighbour's own trouble is not measured
                    pass
        p.close()
        notes["neighbour_records"] = n
    finally:
        rt.down()

SAFE_DISK = ["--set", "broker.flush-messages=1"]           # what survives a power loss: fsync before the ack


def run_command(workload: str, package: str, seed: int, out: str, time_limit: float, extra: list[str],
                kafka_default_flush: bool = False) -> list[str]:
    """The `eoslab run` of one run: the workload's safe settings, and for a disk package an fsync per append
    unless Kafka's default flush is asked for."""
    from cluster.nemesis_disk import DISK_PACKAGES
    disk = SAFE_DISK if package in DISK_PACKAGES and not kafka_default_flush else []
    return [sys.executable, "-m", "eoslab", "run", "--workload", workload, "--nemesis", package,
            "--time-limit", str(time_limit), "--seed", str(seed), "--runtime", "local", "--out", out,
            *SAFE[workload], *disk, *extra]


def verdict(out: str, code: int) -> tuple[str, list[str]]:
    """('valid' | 'anomalies' | 'lab-error', details) of one run."""
    try:
        with open(os.path.join(out, "results.json")) as f:
            r = json.load(f)
    except (OSError, ValueError):
        r = None
    if r is not None and r.get("verdict") == "lab-error":
        return "lab-error", [f"{e.get('kind')}: {e.get('message')}" for e in r.get("lab_errors", [])]
    if code == 0 and r is not None and r.get("valid") is True:
        return "valid", []
    if code == 1 and r is not None:
        return "anomalies", sorted(r.get("anomalies", {}))
    why = ""
    try:
        with open(os.path.join(out, "run.json")) as f:
            why = json.load(f).get("error", "")
    except (OSError, ValueError):
        pass
    return "lab-error", [why or f"eoslab run exited {code} without a verdict"]


def main() -> int:
    from cluster.nemesis import PACKAGES
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--cpu-hogs", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--neighbour", action="store_true")
    ap.add_argument("--time-limit", type=float, default=15.0)
    ap.add_argument("--session-timeout-ms", type=int, default=None)
    ap.add_argument("--packages", default=",".join(PACKAGES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--kafka-default-flush", action="store_true",
                    help="play the disk packages under Kafka's default flush (never fsync): their losses are expected")
    a = ap.parse_args()
    packages = [p for p in a.packages.split(",") if p]
    unknown = [p for p in packages if p not in PACKAGES]
    if unknown:
        print(f"false_alarms: unknown fault package(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    out_root = a.out or tempfile.mkdtemp(prefix="eoslab-false-alarms-")
    os.makedirs(out_root, exist_ok=True)
    stop_hogs = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=hog, args=(stop_hogs,), daemon=True) for _ in range(a.cpu_hogs)]
    for h in hogs:
        h.start()
    stop_nb, notes = threading.Event(), {}
    nb = threading.Thread(target=neighbour, args=(stop_nb, notes), daemon=True) if a.neighbour else None
    if nb:
        nb.start()
    extra = []
    if a.session_timeout_ms:
        for role in ("broker", "controller", "coordinator"):
            extra += ["--set", f"{role}.zk-session-timeout-ms={a.session_timeout_ms}"]
    rows, t_start = [], time.monotonic()
    try:
        for i in range(a.runs):
            workload = ("queue", "txn")[i % 2]
            package = packages[(i // 2) % len(packages)]
            seed = a.first_seed + i
            out = os.path.join(out_root, f"{i:03d}-{workload}-{package}-{seed}")
            cmd = run_command(workload, package, seed, out, a.time_limit, extra, a.kafka_default_flush)
            t0 = time.monotonic()
            with open(os.path.join(out_root, f"{i:03d}.log"), "w") as log:
                code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode
            v, details = verdict(out, code)
            rows.append({"run": i, "workload": workload, "package": package, "seed": seed, "exit": code,
                         "verdict": v, "details": details, "seconds": round(time.monotonic() - t0, 1), "out": out})
            print(f"[{i + 1}/{a.runs} {time.monotonic() - t_start:6.0f}s] {workload:5} {package:20} seed {seed:4} "
                  f"-> {v}{' ' + '; '.join(details)[:160] if details else ''}", flush=True)
    finally:
        stop_hogs.set()
        stop_nb.set()
        for h in hogs:
            h.join(5)
        if nb:
            nb.join(120)
    by_pkg: dict[str, dict[str, int]] = {}
    from cluster.nemesis_disk import DISK_PACKAGES
    for r in rows:
        label = r["package"] + (" (default flush)" if a.kafka_default_flush and r["package"] in DISK_PACKAGES else "")
        c = by_pkg.setdefault(label, {"runs": 0, "valid": 0, "anomalies": 0, "lab-error": 0})
        c["runs"] += 1
        c[r["verdict"]] += 1
    total = {k: sum(c[k] for c in by_pkg.values()) for k in ("runs", "valid", "anomalies", "lab-error")}
    print(f"\n{'package':32} {'runs':>5} {'valid':>6} {'anomalies':>10} {'lab errors':>11}")
    for pkg, c in by_pkg.items():
        print(f"{pkg:32} {c['runs']:5} {c['valid']:6} {c['anomalies']:10} {c['lab-error']:11}")
    print(f"{'all':32} {total['runs']:5} {total['valid']:6} {total['anomalies']:10} {total['lab-error']:11}")
    print(f"cpu hogs {a.cpu_hogs}, neighbour cluster {'yes' if a.neighbour else 'no'}, session timeout "
          f"{a.session_timeout_ms or 'default'} ms, {time.monotonic() - t_start:.0f} s in all")
    for r in rows:
        if r["verdict"] != "valid":
            print(f"  {r['verdict']}: {r['workload']} {r['package']} seed {r['seed']}: {'; '.join(r['details'])}"
                  f"  ({r['out']})")
    with open(os.path.join(out_root, "summary.json"), "w") as f:
        json.dump({"args": vars(a), "by_package": by_pkg, "total": total, "runs": rows, **notes}, f, indent=1)
    print(f"summary: {os.path.join(out_root, 'summary.json')}")
    expected = sum(c["anomalies"] for k, c in by_pkg.items() if k.endswith("(default flush)"))
    return 0 if total["anomalies"] == expected and total["lab-error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
