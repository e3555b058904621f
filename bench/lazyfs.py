"""What the lazy filesystem costs: the broker's log module (UnifiedLog) appending and reading
sequentially on a lazyfs mount vs a plain directory, in the same run.

Usage: python bench/lazyfs.py [--batches 20000] [--records 10] [--record-bytes 100]
                              [--fsync-every 100] [--rounds 3] [--out FILE.json]

Each round writes --batches batches of --records records of --record-bytes bytes through
UnifiedLog.append into one segment (segment_bytes 1 GiB, so every round measures the same
file layout; the figures in docs/benchmarks.md were taken so), fsyncing the active segment every
--fsync-every batches (0: never), closes the log, reopens it (recovery scans every
segment) and reads every batch back with UnifiedLog.batches(). The plain directory and
the lazyfs mount (its backing directory on the same filesystem) alternate, swapping the
order each round. Prints MB/s of append, reopen and read per run, the medians and the
ratio lazyfs/plain. Needs FUSE (see docs/lazyfs.md); exits 2 with the reason otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.lazyfs import LazyFs  # noqa: E402
from eoslab.common import record_batch as rb  # noqa: E402
from services.broker.log import StoredBatch, UnifiedLog  # noqa: E402

SEGMENT = 1 << 30


def one_run(directory: str, a) -> dict:
    payload = os.urandom(a.record_bytes)
    proto = StoredBatch.from_proto(rb.build_batch([(None, payload, 0)] * a.records))
    log = UnifiedLog(directory, segment_bytes=SEGMENT)
    t0 = time.perf_counter()
    for i in range(a.batches):
        proto.base_offset = log.log_end_offset
        log.append(proto)
        if a.fsync_every and (i + 1) % a.fsync_every == 0:
            os.fsync(log.segments[-1]._f.fileno())
    t1 = time.perf_counter()
    log.close()
    log = UnifiedLog(directory, segment_bytes=SEGMENT)
    t2 = time.perf_counter()
    n = sum(1 for _ in log.batches())
    t3 = time.perf_counter()
    log.close()
    assert n == a.batches, f"read {n} batches of {a.batches}"
    mb = a.batches * len(proto.frame()) / 1e6
    return {"append_mb_s": mb / (t1 - t0), "reopen_mb_s": mb / (t2 - t1), "read_mb_s": mb / (t3 - t2),
            "mb": mb}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=20000)
    p.add_argument("--records", type=int, default=10)
    p.add_argument("--record-bytes", type=int, default=100)
    p.add_argument("--fsync-every", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out")
    a = p.parse_args()
    reason = LazyFs.available()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    scratch = tempfile.mkdtemp(prefix="lazyfs-bench-")
    fs = LazyFs(os.path.join(scratch, "backing"), os.path.join(scratch, "mnt")).mount()
    runs: dict[str, list[dict]] = {"plain": [], "lazyfs": []}
    try:
        for r in range(a.rounds):
            order = ["plain", "lazyfs"] if r % 2 == 0 else ["lazyfs", "plain"]
            for kind in order:
                root = os.path.join(scratch, "plain") if kind == "plain" else fs.mountpoint
                d = os.path.join(root, f"topic-{r}")
                res = one_run(d, a)
                shutil.rmtree(d)
                if kind == "lazyfs":
                    fs.sync_all()
                runs[kind].append(res)
                print(f"round {r} {kind:6}: append {res['append_mb_s']:7.1f} MB/s  reopen "
                      f"{res['reopen_mb_s']:7.1f} MB/s  read {res['read_mb_s']:7.1f} MB/s  ({res['mb']:.1f} MB)",
                      flush=True)
    finally:
        fs.unmount()
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {}
    for key in ("append_mb_s", "reopen_mb_s", "read_mb_s"):
        plain = statistics.median(x[key] for x in runs["plain"])
        lazy = statistics.median(x[key] for x in runs["lazyfs"])
        summary[key] = {"plain": plain, "lazyfs": lazy, "ratio": lazy / plain}
        print(f"median {key[:-5]:7}: plain {plain:7.1f} MB/s  lazyfs {lazy:7.1f} MB/s  ratio {lazy / plain:.3f}")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "runs": runs, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
