"""Benchmark: `eoslab analyze` over 10,000,000 ops in 1,000 runs, on local[1] and local[2].

Guarantees: writes (or reuses, when its manifest matches) a store of
synthetic runs (pipeline.synth: the history contract's shape, producers with
pid/seq, consumers, nemesis pairs) — 4 configurations x 5 fault packages x
50 seeds by default, each run --ops-per-run ops, with anomalies injected at
rates that depend on the configuration and the fault (the safe configuration
gets none) — then runs `eoslab analyze` as a fresh process per master (its
own JVM, so each figure includes Spark's start) and prints, per master, the
wall time, ops/s, the speed-up over the first master, and the CPU seconds
the job's whole process tree used (driver, JVM, Python workers; measured in
a cgroup-v1 cpuacct group of its own, when root) with the 1-minute load
average before and after, and how those CPU seconds divide between the
driver, the JVM and the Python workers (one unmeasured analysis of a single run first, so
that Spark's class-data-sharing archive exists, as after any first use) — on a shared machine wall time depends on the
others' load, CPU time much less. It checks the
matrix against the injections (the number of invalid runs and every
anomaly count), so a fast but wrong run does not pass: exit 1 then.
`--baseline` also times check_kafka on every history in one plain Python
process (no Spark: the checker's own cost on one core), before the masters,
and prints each master's ops per CPU-second as a share of it. `--profile DIR`
runs each master under py-spy (`record --subprocesses`, raw format, into
DIR) and prints where the driver's and the Python workers' samples went.

    .venv/bin/python bench/analyze.py [--runs 1000] [--ops-per-run 10000] [--masters local[1],local[2]]
                                      [--store DIR] [--out DIR] [--baseline] [--driver-memory 4g]
                                      [--profile DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIGS = [
    {"acks": "1", "enable.idempotence": "false"},
    {"acks": "all", "enable.idempotence": "false"},
    {"acks": "all", "enable.idempotence": "true", "max.in.flight.requests.per.connection": "6",
     "on.out.of.order": "bump-epoch"},
    {"acks": "all", "enable.idempotence": "true", "max.in.flight.requests.per.connection": "5"},
]
FAULTS = [["kill"], ["kill-leader"], ["partition"], ["lost-ack"], ["pause"]]
# chance per run of each injection, by configuration index; faults scale them (FAULT_WEIGHT)
RATES = [{"lost": 0.5, "duplicate": 0.4, "g1a": 0.1, "unseen": 0.2},
         {"duplicate": 0.4, "rewind": 0.05},
         {"duplicate": 0.15},
         {}]
FAULT_WEIGHT = {"kill": 1.0, "kill-leader": 1.0, "partition": 0.6, "lost-ack": 0.8, "pause": 0.3}


def plan(runs: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    cells = [(ci, f) for ci in range(len(CONFIGS)) for f in FAULTS]
    out = []
    for i in range(runs):
        ci, fault = cells[i % len(cells)]
        w = FAULT_WEIGHT[fault[0]]
        inject = {k: 1 for k, p in RATES[ci].items() if rng.random() < p * w}
        out.append({"run": f"c{ci}/{fault[0]}/seed-{i // len(cells)}", "config": ci, "nemesis": fault,
                    "seed": i // len(cells), "inject": inject})
    return out


def _write(args) -> int:
    store, spec, n_ops = args
    from pipeline import synth
    info = synth.write_run(os.path.join(store, spec["run"]), n_ops=n_ops, seed=spec["seed"],
                           settings=CONFIGS[spec["config"]], nemesis=spec["nemesis"], inject=spec["inject"])
    return info["ops"]


def make_store(store: str, runs: int, ops_per_run: int, workers: int) -> tuple[list[dict], int]:
    specs = plan(runs)
    manifest = os.path.join(store, ".bench-manifest.json")
    want = {"runs": runs, "ops_per_run": ops_per_run, "specs": specs}
    if os.path.exists(manifest):
        with open(manifest) as fh:
            have = json.load(fh)
        if {k: have.get(k) for k in want} == want:
            print(f"store: reusing {store} ({have['ops']:,} ops in {runs} runs)")
            return specs, have["ops"]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        total = sum(pool.map(_write, [(store, s, ops_per_run) for s in specs], chunksize=8))
    with open(manifest, "w") as fh:
        json.dump({**want, "ops": total}, fh)
    size = sum(f.stat().st_size for f in Path(store).rglob("history.jsonl"))
    print(f"store: generated {total:,} ops in {runs} runs ({size / 2**20:.0f} MiB of JSONL) "
          f"in {time.perf_counter() - t0:.1f} s -> {store}")
    return specs, total


def verify(out: str, specs: list[dict]) -> list[str]:
    """Matrix vs injections: invalid runs and anomaly counts per type, over the whole store."""
    import pyarrow.parquet as pq
    from pipeline import synth
    rows = pq.read_table(os.path.join(out, "matrix.parquet")).to_pylist()
    want: dict[str, int] = {}
    invalid = 0
    for s in specs:
        counts, unseen = synth.expected_findings(s["inject"])
        invalid += bool(counts)
        for t, n in counts.items():
            want[t] = want.get(t, 0) + n
        want["unseen"] = want.get("unseen", 0) + unseen
    got: dict[str, int] = {}
    for r in rows:
        if r["kind"] == "anomaly" and r["anomaly"] != "(any)" and r["count"]:
            got[r["anomaly"]] = got.get(r["anomaly"], 0) + r["count"]
    errors = []
    if {k: v for k, v in got.items() if v} != {k: v for k, v in want.items() if v}:
        errors.append(f"anomaly counts {got} != injected {want}")
    got_invalid = sum(r["runs_with"] for r in rows if r["anomaly"] == "(any)")
    if got_invalid != invalid:
        errors.append(f"invalid runs {got_invalid} != {invalid}")
    return errors


CPUACCT = "/sys/fs/cgroup/cpuacct"


class CpuMeter:
    """CPU seconds of a process tree (driver, JVM, Python workers) through a cgroup-v1 cpuacct group
    of its own; None where that cannot be made (not root, no cpuacct). On a shared machine the
    wall time depends on everyone's load; the CPU time much less."""

    def __init__(self, name: str):
        self.path = os.path.join(CPUACCT, name)
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError:
            self.path = None

    def enter(self) -> None:          # preexec_fn: the child and everything it starts
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))

    def seconds(self) -> float | None:
        if not self.path:
            return None
        with open(os.path.join(self.path, "cpuacct.usage")) as fh:
            return int(fh.read()) / 1e9

    def pids(self) -> list[int]:
        if not self.path:
            return []
        with open(os.path.join(self.path, "cgroup.procs")) as fh:
            return [int(x) for x in fh.read().split()]

    def close(self) -> None:
        if self.path:
            for _ in range(50):                    # the JVM may take a moment to exit
                try:
                    os.rmdir(self.path)
                    return
                except OSError:
                    time.sleep(0.2)


def _kind(pid: int) -> str | None:
    """Which part of the job a process is, by its command line (None: gone, or a zombie's empty one)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if not cmd.strip():
        return None
    if "java" in cmd.split(" ")[0]:         # first: its command line names the daemon module too
        return "JVM"
    if "pyspark.daemon" in cmd or "pipeline.spark_daemon" in cmd:
        return "python workers"
    if "eoslab" in cmd and "analyze" in cmd:
        return "driver"
    return None if "py-spy" in cmd else "other"


class Split(threading.Thread):
    """CPU seconds per part of the job (driver, JVM, Python workers), from /proc of the cgroup's
    processes read every 0.25 s: a lower bound (what a process used in its last 0.25 s is missed).
    A process is classified again at every read, since its kind can change: spark-submit is a bash
    script naming the app "eoslab analyze" that later execs java in the same pid. Its CPU so far
    then counts for its latest kind (a process's counters go on across exec); a process that has
    become a zombie keeps the kind it had."""

    def __init__(self, meter: CpuMeter):
        super().__init__(daemon=True)
        self.meter, self.seen, self.done = meter, {}, threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.done.wait(0.25):
            try:
                pids = self.meter.pids()
            except OSError:
                return
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as fh:
                        f = fh.read().rpartition(")")[2].split()
                except OSError:
                    continue
                kind = _kind(pid) or self.seen.get(pid, (None, 0))[0]
                if kind:
                    self.seen[pid] = (kind, (int(f[11]) + int(f[12])) / self.tick)

    def seconds(self) -> dict[str, float]:
        self.done.set()
        self.join()
        out: dict[str, float] = {}
        for kind, s in self.seen.values():
            out[kind] = round(out.get(kind, 0) + s, 1)
        return out


def analyze(store: str, out: str, master: str, driver_memory: str, profile: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "eoslab", "analyze", store, "--out", out, "--master", master,
           "--conf", f"spark.driver.memory={driver_memory}"]
    name = master.replace("[", "").replace("]", "").replace("*", "all")
    if profile:                     # py-spy samples the driver, the JVM's Python daemon and its workers
        os.makedirs(profile, exist_ok=True)
        cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--subprocesses", "-r", "100",
               "--format", "raw", "-o", os.path.join(profile, f"{name}.raw"), "--"] + cmd
    meter = CpuMeter(f"eoslab-bench-{os.getpid()}-{name}")
    split = Split(meter)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        if meter.path:
            split.start()
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, preexec_fn=meter.enter)
        wall = time.perf_counter() - t0
        cpu = meter.seconds()
    finally:
        parts = split.seconds() if split.is_alive() else {}
        meter.close()
    if r.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {r.returncode}")
    summary = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])   # py-spy talks too
    return {"master": master, "wall_s": round(wall, 1), "job_s": summary["seconds"], "ops": summary["ops"],
            "ops_per_s": round(summary["ops"] / wall), "cpu_s": None if cpu is None else round(cpu, 1),
            "ops_per_cpu_s": None if not cpu else round(summary["ops"] / cpu), "runs": summary["runs"],
            "load_before": round(load, 1), "load_after": round(os.getloadavg()[0], 1), "cpu_split_s": parts,
            "profiled": bool(profile)}


def top_frames(raw: str, k: int = 12) -> str:
    """py-spy's raw samples as text: per part of the job, its share of the samples, then the k
    frames with most samples inside them (inclusive) and the k with most samples of their own."""
    parts: dict[str, dict] = {}
    total = 0
    with open(raw) as fh:
        for line in fh:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            procs = [f for f in frames if f.startswith("process ")]
            cmd = procs[-1].partition(":")[2] if procs else ""
            kind = ("python workers" if "pyspark.daemon" in cmd or "spark_daemon" in cmd
                    else "driver" if "eoslab" in cmd else "other")
            code = [f for f in frames if not f.startswith("process ")]
            if not code:
                continue
            total += int(n)
            p = parts.setdefault(kind, {"n": 0, "incl": {}, "own": {}})
            p["n"] += int(n)
            p["own"][code[-1]] = p["own"].get(code[-1], 0) + int(n)
            for f in set(code):
                if "<frozen" not in f and "(daemon.py" not in f and "(worker.py" not in f:
                    p["incl"][f] = p["incl"].get(f, 0) + int(n)
    out = []
    for kind, p in sorted(parts.items(), key=lambda kv: -kv[1]["n"]):
        out.append(f"{kind}: {100 * p['n'] / total:.1f}% of {total} samples")
        for title, d in (("inclusive", p["incl"]), ("own", p["own"])):
            out.append(f"  {title}:")
            for f, n in sorted(d.items(), key=lambda kv: -kv[1])[:k]:
                out.append(f"    {100 * n / total:5.1f}%  {f}")
    return "\n".join(out)


def baseline(store: str) -> dict:
    code = ("import sys,time,pathlib\nfrom checker.kafka import check_kafka\nt=time.perf_counter();c=time.process_time()\n"
            "n=0\nfor p in sorted(pathlib.Path(sys.argv[1]).rglob('history.jsonl')):\n"
            "    n+=check_kafka(str(p))['stats']['ops']\n"
            "print(n, time.perf_counter()-t, time.process_time()-c)")
    r = subprocess.run([sys.executable, "-c", code, store], cwd=ROOT, capture_output=True, text=True, check=True)
    n, s, c = r.stdout.split()
    return {"ops": int(n), "seconds": round(float(s), 1), "ops_per_s": round(int(n) / float(s)),
            "cpu_s": round(float(c), 1), "ops_per_cpu_s": round(int(n) / float(c))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ops-per-run", type=int, default=10_000)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--store", default=str(ROOT / "store" / "bench-analyze"))
    ap.add_argument("--out", default=str(ROOT / "out" / "bench-analyze"))
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--gen-workers", type=int, default=2)
    ap.add_argument("--baseline", action="store_true", help="also time check_kafka alone, one core, no Spark")
    ap.add_argument("--profile", metavar="DIR",
                    help="run each master under py-spy (driver and Python workers; DIR/<master>.raw) and print "
                         "its top frames; its CPU figures then include py-spy's own")
    args = ap.parse_args(argv)
    specs, total = make_store(args.store, args.runs, args.ops_per_run, args.gen_workers)
    warm_up(args.store, args.out, args.driver_memory)
    load = os.getloadavg()[0]
    b = None
    if args.baseline:
        b = baseline(args.store)
        print(f"baseline: check_kafka over every history in one process, no Spark: {b['seconds']} s wall, "
              f"{b['cpu_s']} s CPU, {b['ops_per_cpu_s']:,} ops per CPU-s", flush=True)
    results = []
    for master in [m.strip() for m in args.masters.split(",") if m.strip()]:
        out = os.path.join(args.out, master.replace("[", "-").replace("]", "").replace("*", "all"))
        res = analyze(args.store, out, master, args.driver_memory, args.profile)
        errors = verify(out, specs)
        if errors:
            print(f"bench: {master}: the matrix disagrees with the injections: {'; '.join(errors)}", file=sys.stderr)
            return 1
        results.append(res)
        print(json.dumps(res), flush=True)
        if args.profile:
            name = master.replace("[", "").replace("]", "").replace("*", "all")
            print(top_frames(os.path.join(args.profile, f"{name}.raw")), flush=True)
    print(f"\n{total:,} ops in {args.runs} runs; 1-minute load average before: {load:.1f} "
          f"(on {os.cpu_count()} CPUs)\n")
    print("| master | wall time (s) | ops/s | speed-up | CPU time (s) | ops per CPU-s | load before/after |\n"
          "|---|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(f"| {r['master']} | {r['wall_s']} | {r['ops_per_s']:,} | {results[0]['wall_s'] / r['wall_s']:.2f}x "
              f"| {r['cpu_s']} | {r['ops_per_cpu_s'] if r['ops_per_cpu_s'] is None else format(r['ops_per_cpu_s'], ',')} "
              f"| {r['load_before']} / {r['load_after']} |")
    if b:
        print(f"| check_kafka alone, one process, no Spark | {b['seconds']} | {b['ops_per_s']:,} | "
              f"| {b['cpu_s']} | {b['ops_per_cpu_s']:,} | |")
        for r in results:
            if r["ops_per_cpu_s"]:
                print(f"{r['master']}: ops per CPU-second {r['ops_per_cpu_s'] / b['ops_per_cpu_s']:.2f} of the "
                      f"plain loop's")
    return 0


def warm_up(store: str, out: str, driver_memory: str) -> None:
    """One unmeasured `eoslab analyze` of a single run, so that Spark's class-data-sharing archive
    (pipeline.jvm_cds), which the first start ever writes, exists before any measured start."""
    import shutil
    import tempfile
    first = min(Path(store).rglob("history.jsonl"))
    with tempfile.TemporaryDirectory(dir=out if os.path.isdir(out) else None) as tmp:
        run = os.path.join(tmp, "store", "r")
        os.makedirs(run)
        shutil.copy(first, os.path.join(run, "history.jsonl"))
        shutil.copy(first.parent / "run.json", os.path.join(run, "run.json"))
        subprocess.run([sys.executable, "-m", "eoslab", "analyze", os.path.join(tmp, "store"), "--out",
                        os.path.join(tmp, "out"), "--master", "local[1]", "--no-progress",
                        "--conf", f"spark.driver.memory={driver_memory}"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    sys.exit(main())
