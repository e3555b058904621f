"""Benchmark: the linearizability checker on the knossos corpus.

Guarantees: reads every `*/good/*.edn` and `*/bad/*.edn` under the corpus
directory (default: tests/data/knossos of this repo), checks each with the
model its directory names (cas-register from 0, multi-register from
{x: 0, y: 0}), and prints one line per file — read time, check time, verdict,
expected verdict — then totals. Exits 1 if any verdict differs from the
directory's (good = valid, bad = invalid).

    .venv/bin/python bench/checker_knossos.py [CORPUS_DIR] [--time-limit S] [--repeat N]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checker.formats import open_history  # noqa: E402
from checker.linear import check_linearizable  # noqa: E402

SETUP = {"cas-register": ("cas-register", 0), "multi-register": ("multi-register", {"x": 0, "y": 0})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "tests" / "data" / "knossos"))
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per history")
    ap.add_argument("--repeat", type=int, default=1, help="check each history N times, report the best")
    args = ap.parse_args(argv)

    files = sorted(Path(args.corpus).glob("*/*/*.edn"))
    if not files:
        print(f"no */good|bad/*.edn files under {args.corpus}", file=sys.stderr)
        return 2
    print(f"# {' '.join([Path(sys.executable).name] + sys.argv)}")
    print(f"{'history':52s} {'ops':>6s} {'read_s':>8s} {'check_s':>8s}  verdict  expected")
    total_read = total_check = 0.0
    total_ops = wrong = unknown = 0
    for path in files:
        model, initial = SETUP[path.parts[-3]]
        expected = path.parts[-2] == "good"
        t0 = time.perf_counter()
        ops = list(open_history(path))
        t_read = time.perf_counter() - t0
        best = None
        for _ in range(args.repeat):
            t1 = time.perf_counter()
            r = check_linearizable(ops, model, initial, time_limit=args.time_limit)
            dt = time.perf_counter() - t1
            best = dt if best is None else min(best, dt)
        verdict = r["valid"]
        mark = "" if verdict is expected else ("  UNKNOWN" if verdict == "unknown" else "  WRONG")
        wrong += verdict is not expected and verdict != "unknown"
        unknown += verdict == "unknown"
        total_read += t_read
        total_check += best
        total_ops += len(ops)
        name = "/".join(path.parts[-3:])
        print(f"{name:52s} {len(ops):6d} {t_read:8.4f} {best:8.4f}  {str(verdict):7s}  "
              f"{'valid' if expected else 'invalid'}{mark}")
    print(f"total: {len(files)} histories, {total_ops} ops, read {total_read:.3f} s, "
          f"check {total_check:.3f} s, wrong {wrong}, unknown {unknown}")
    return 1 if wrong or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
