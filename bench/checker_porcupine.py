"""Benchmark: the linearizability checker on Porcupine's corpus, beside Porcupine's own Go tests.

Guarantees: judges every history of tests/data/porcupine (102 etcd logs with
the cas-register model; the 6 kv histories with Porcupine's kv model per key,
and c01/c10 also as one map, as Porcupine's tests do), checks every verdict
against verdicts.json and prints CPU seconds (reading and checking, best of
--repeat rounds). With --porcupine-src DIR (a checkout of
anishathalye/porcupine) and `go` on PATH (Debian: golang-go), it also builds
Porcupine's test binary once, offline, and times the same tests
(TestEtcdJepsen*, TestKv*; `-test.short` leaves out the two unpartitioned
c10 runs unless --go-long) by the CPU time of the child process, best of
--repeat. Exits 1 on a wrong verdict.

    .venv/bin/python bench/checker_porcupine.py [--repeat 3] [--porcupine-src DIR] [--go-long]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data" / "porcupine"


def cases() -> list[tuple[str, Path, str, bool, bool]]:
    """(group, path, model, partition, expected verdict)."""
    v = json.loads((DATA / "verdicts.json").read_text())
    out = [("etcd", DATA / "etcd" / f"{n}.log.gz", "cas-register", True, ok) for n, ok in v["etcd"].items()]
    out += [("kv", DATA / "kv" / f"{n}.txt.gz", "kv", True, ok) for n, ok in v["kv"].items()]
    out += [("kv whole", DATA / "kv" / f"{n}.txt.gz", "kv", False, v["kv"][n])
            for n in ("c01-ok", "c01-bad", "c10-ok", "c10-bad")]
    return out


def ours(repeat: int) -> tuple[dict, int]:
    from checker.formats import open_history
    from checker.linear import check_linearizable
    best: dict[str, float] = {}
    wrong = 0
    for _ in range(repeat):
        spent: dict[str, float] = {}
        for group, path, model, partition, expected in cases():
            c0 = time.process_time()
            r = check_linearizable(open_history(str(path), "auto"), model, partition=partition)
            spent[group] = spent.get(group, 0.0) + time.process_time() - c0
            if r["valid"] is not expected:
                wrong += 1
                print(f"WRONG: {path.name} ({model}, partition={partition}): {r['valid']}", file=sys.stderr)
        best = {g: min(t, best.get(g, t)) for g, t in spent.items()}
    return best, wrong


def porcupine(src: str, repeat: int, long: bool) -> dict:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("go is not installed (Debian: apt-get install golang-go)")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=tempfile.mkdtemp(prefix="gocache-"))
    binary = os.path.join(tempfile.mkdtemp(prefix="porcupine-"), "porcupine.test")
    subprocess.run([go, "test", "-c", "-o", binary, "."], cwd=src, env=env, check=True)
    out = {}
    for group, pattern in (("etcd", "^TestEtcdJepsen"), ("kv", "^TestKv")):
        best = None
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            args = [binary, "-test.run", pattern, "-test.count", "1"] + ([] if long else ["-test.short"])
            subprocess.run(args, cwd=src, env=env, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            best = cpu if best is None else min(best, cpu)
        out[group] = best
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--porcupine-src", metavar="DIR", help="a checkout of anishathalye/porcupine")
    ap.add_argument("--go-long", action="store_true", help="Go: also the unpartitioned c10 tests (slow)")
    args = ap.parse_args(argv)
    mine, wrong = ours(args.repeat)
    n = len(cases())
    print(f"eoslab: {n} checks, {wrong} wrong verdicts; CPU s (best of {args.repeat}): "
          + ", ".join(f"{g} {t:.2f}" for g, t in mine.items()))
    if args.porcupine_src:
        theirs = porcupine(args.porcupine_src, args.repeat, args.go_long)
        print(f"porcupine go test{'' if args.go_long else ' -test.short'}: CPU s (best of {args.repeat}, "
              f"process incl. parsing): etcd {theirs['etcd']:.2f}, kv {theirs['kv']:.2f}")
        print(f"etcd: eoslab {mine['etcd']:.2f} s vs porcupine {theirs['etcd']:.2f} s; "
              f"kv (per key + c01/c10 whole): eoslab {mine['kv'] + mine['kv whole']:.2f} s vs porcupine "
              f"{theirs['kv']:.2f} s")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
