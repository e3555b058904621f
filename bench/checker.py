"""Benchmark: the Kafka analysis on a generated 1,000,000-op history.

Guarantees: writes (or reuses) a seeded synthetic history — 8 producer
processes sending to 8 keys with producer/seq fields, 8 read_committed
consumers polling them, overlapping ops, a few indefinite and failed sends,
nemesis partitions, final polls that catch up — then runs `check_kafka` on
it in a fresh process (so the figures are the analysis alone) and prints wall
time, CPU time and peak RSS (ru_maxrss; the interpreter's own is shown too).
The budget applies to CPU time, the single core's work: on a shared machine
wall time also counts the waits for a core. The history is valid by construction; exits 1 if the checker
says otherwise or takes longer than --budget seconds. With --knossos, also
runs bench/checker_knossos.py (the linearizability corpus, per file) when
checker.linear is present; bench/checker_porcupine.py times Porcupine's
corpus beside Porcupine's Go tests.

    .venv/bin/python bench/checker.py [--ops 1000000] [--file PATH] [--budget 10] [--knossos]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    import orjson

    def dumps(d: dict) -> bytes:
        return orjson.dumps(d) + b"\n"
except ImportError:  # pragma: no cover
    def dumps(d: dict) -> bytes:
        return (json.dumps(d, separators=(",", ":")) + "\n").encode()


def generate(path: str, n_ops: int, seed: int = 42, keys: int = 8, producers: int = 8,
             consumers: int = 8) -> dict:
    """Write a valid history of about n_ops ops; returns a few counts."""
    rng = random.Random(seed)
    logs = [[] for _ in range(keys)]          # per key: values in offset order
    pos = [0] * consumers                      # consumer positions
    seqs = {}
    pending = {}                               # process -> invoke dict
    procs = list(range(producers + consumers))
    idx = 0
    t = 0
    next_value = 0
    out = open(path, "wb")
    buf = []

    def emit(d):
        nonlocal idx
        d["index"] = idx
        d["time"] = t
        idx += 1
        buf.append(dumps(d))
        if len(buf) >= 4096:
            out.write(b"".join(buf))
            buf.clear()

    def complete(p, inv):
        f = inv["f"]
        if f == "send":
            k, v = inv["value"][0][1], inv["value"][0][2]
            pid = 1000 + p
            prod = {"pid": pid, "epoch": 0, "session": f"p{p}", "transactional_id": None}
            r = rng.random()
            if r < 0.005:
                emit({"process": p, "type": "fail", "f": "send", "value": inv["value"],
                      "error": "NOT_ENOUGH_REPLICAS", "producer": prod})
                return
            s = seqs.get((pid, k), 0)
            seqs[(pid, k)] = s + 1
            logs[k].append(v)
            if r < 0.015:
                emit({"process": p, "type": "info", "f": "send", "value": inv["value"],
                      "error": "REQUEST_TIMED_OUT", "producer": prod, "seq": [s]})
                return
            emit({"process": p, "type": "ok", "f": "send",
                  "value": [["send", k, [len(logs[k]) - 1, v]]], "producer": prod, "seq": [s]})
        else:
            c = p - producers
            k = c % keys
            lo = pos[c]
            hi = min(len(logs[k]), lo + rng.randint(1, 12))
            pos[c] = hi
            pairs = [[o, logs[k][o]] for o in range(lo, hi)]
            emit({"process": p, "type": "ok", "f": "poll", "value": [["poll", {str(k): pairs}]],
                  "isolation": "read_committed"})

    nemesis_at = rng.randint(20_000, 60_000)
    nemesis_open = False
    budget = n_ops - 2 * len(procs) - 4
    while idx < budget:
        t += rng.randint(50_000, 400_000)
        if idx >= nemesis_at:
            f = "stop-partition" if nemesis_open else "start-partition"
            emit({"process": "nemesis", "type": "invoke", "f": f, "value": None})
            emit({"process": "nemesis", "type": "info", "f": f,
                  "value": None if nemesis_open else {"isolated": [rng.randint(1, 3)]}})
            nemesis_open = not nemesis_open
            nemesis_at = idx + rng.randint(20_000, 60_000)
            continue
        p = rng.choice(procs)
        inv = pending.pop(p, None)
        if inv is not None:
            complete(p, inv)
            continue
        if p < producers:
            k = rng.randrange(keys)
            inv = {"process": p, "type": "invoke", "f": "send", "value": [["send", k, next_value]]}
            next_value += 1
        else:
            inv = {"process": p, "type": "invoke", "f": "poll", "value": [["poll"]]}
        pending[p] = inv
        emit(dict(inv))
    for p, inv in list(pending.items()):
        t += 100_000
        complete(p, inv)
    pending.clear()
    # final polls: every consumer catches up (keeps the history free of unseen records)
    behind = True
    while behind and idx < n_ops * 2:
        behind = False
        for c in range(consumers):
            k = c % keys
            if pos[c] < len(logs[k]):
                behind = True
                p = producers + c
                t += 100_000
                emit({"process": p, "type": "invoke", "f": "poll", "value": [["poll"]]})
                complete(p, {"f": "poll"})
    if nemesis_open:
        emit({"process": "nemesis", "type": "invoke", "f": "stop-partition", "value": None})
        emit({"process": "nemesis", "type": "info", "f": "stop-partition", "value": None})
    out.write(b"".join(buf))
    out.close()
    return {"ops": idx, "records": next_value}


def analyze(path: str) -> int:
    """Child process: run the analysis, print one JSON line of figures."""
    from checker.kafka import check_kafka
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0 = time.process_time()
    t0 = time.perf_counter()
    res = check_kafka(path)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"valid": res["valid"], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                      "peak_rss_mib": round(peak / 1024, 1),
                      "baseline_rss_mib": round(base / 1024, 1),
                      "ops": res["stats"]["ops"], "records": res["stats"]["records"],
                      "anomaly_counts": res["stats"]["anomaly_counts"],
                      "realtime_lag": {k: res["realtime_lag"][k] for k in ("max_ms", "p99_ms", "samples")},
                      "allowed_counts": res["stats"]["allowed_counts"]}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--file", help="history path (generated if missing); default: a temp file")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--budget", type=float, default=10.0, help="CPU seconds the analysis may take")
    ap.add_argument("--knossos", action="store_true", help="also time the knossos corpus")
    ap.add_argument("--analyze", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.analyze:
        return analyze(args.analyze)

    tmp = None
    path = args.file
    if path is None:
        tmp = tempfile.NamedTemporaryFile(prefix="eoslab-bench-", suffix=".jsonl", delete=False)
        tmp.close()
        path = tmp.name
    try:
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            t0 = time.perf_counter()
            info = generate(path, args.ops, args.seed)
            print(f"generated {info['ops']} ops, {info['records']} records -> {path} "
                  f"({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")
        out = subprocess.run([sys.executable, __file__, "--analyze", path],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        fig = json.loads(out.stdout)
        print(f"kafka analysis: {fig['ops']} ops in {fig['wall_s']:.2f} s wall "
              f"({fig['cpu_s']:.2f} s CPU, one core), peak RSS {fig['peak_rss_mib']:.0f} MiB "
              f"(interpreter + imports {fig['baseline_rss_mib']:.0f} MiB); valid={fig['valid']}")
        print(f"records: {fig['records']}")
        print(f"allowed: {fig['allowed_counts']}  anomalies: {fig['anomaly_counts']}")
        print(f"realtime lag: {fig['realtime_lag']}")
        rc = 0
        if fig["valid"] is not True:
            print("FAIL: the generated history is valid by construction", file=sys.stderr)
            rc = 1
        if fig["cpu_s"] > args.budget:
            print(f"FAIL: over the {args.budget} s budget", file=sys.stderr)
            rc = 1
    finally:
        if tmp is not None:
            os.unlink(path)
    if args.knossos:
        import importlib.util
        if importlib.util.find_spec("checker.linear") is None:
            print("knossos: checker.linear not available, skipped")
        else:
            knossos = ROOT / "bench" / "checker_knossos.py"
            rc = subprocess.run([sys.executable, str(knossos)], cwd=ROOT).returncode or rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
