"""Client-op latencies of one history as log-bucket histograms, which add up across runs.

Guarantees: `latencies(ops)` pairs each client completion with its
process's open invoke (nemesis ops and ops without an integer `time` are
skipped) and returns histograms for sends/txns and for polls, plus their
exact maxima in ns. Bucket 0 holds latencies below 1 µs; bucket b >= 1
holds [10^((b-1)/20), 10^(b/20)) µs, up to 100 s (the last bucket takes
everything above). `bucket_mid_ns(b)` is the geometric middle of bucket b,
within 6% of any latency in it: quantiles read from summed histograms are
that close to the exact ones. `latencies_columns` gives exactly what
`latencies` gives, from numpy columns of the same ops (the pipeline's
path; bucket edges found with `bucket` itself, so no rounding differs).
"""
from __future__ import annotations

import math

BUCKETS_PER_DECADE = 20
DECADES = 8                      # 1 µs .. 100 s
N_BUCKETS = BUCKETS_PER_DECADE * DECADES + 1


def bucket(ns: int) -> int:
    if ns < 1000:
        return 0
    return min(N_BUCKETS - 1, 1 + int(BUCKETS_PER_DECADE * math.log10(ns / 1000.0)))


def bucket_mid_ns(b: int) -> float:
    """A representative latency for bucket b: the geometric middle of its range."""
    if b == 0:
        return 500.0
    return 1000.0 * 10 ** ((b - 0.5) / BUCKETS_PER_DECADE)


def latencies(ops: list[dict]) -> tuple[list[int], list[int], int, int]:
    """Histograms (sends/txns, polls) of invoke -> completion per process, and their maxima."""
    send, poll = [0] * N_BUCKETS, [0] * N_BUCKETS
    mx = [0, 0]
    open_: dict = {}
    for d in ops:
        p = d.get("process")
        if p == "nemesis" or type(p) in (list, dict):
            continue
        t = d.get("time")
        if type(t) is not int:
            continue
        if d.get("type") == "invoke":
            open_[p] = t
            continue
        t0 = open_.pop(p, None)
        f = d.get("f")
        if t0 is None or (f != "send" and f != "txn" and f != "poll"):
            continue
        lat = max(t - t0, 0)
        i = 1 if f == "poll" else 0
        (poll if i else send)[bucket(lat)] += 1
        if lat > mx[i]:
            mx[i] = lat
    return send, poll, mx[0], mx[1]


def _edges() -> list[int]:
    """edges[b-1] = the smallest latency in ns that `bucket` puts in bucket b or above (b >= 1):
    searching these gives exactly `bucket`'s answer (it never decreases as ns grows)."""
    out, lo = [], 0
    for b in range(1, N_BUCKETS):
        hi = 10 ** 15
        while lo < hi:
            mid = (lo + hi) // 2
            if bucket(mid) >= b:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return out


EDGES = _edges()


def latencies_columns(codes, times, is_invoke, kind, keep):
    """`latencies` over columns (numpy arrays, one entry per op, in history order): `codes` the
    process (equal codes = equal process), `times` int ns, `is_invoke`, `kind` 0 for send/txn,
    1 for poll, 2 for any other f, `keep` False for ops `latencies` skips (nemesis, no integer
    time). Same histograms and maxima as `latencies` on the same ops: a completion pairs with the
    op just before it of its process (among kept ops) when that op is an invoke."""
    import numpy as np

    idx = np.flatnonzero(keep)
    send, poll = [0] * N_BUCKETS, [0] * N_BUCKETS
    if idx.size < 2:
        return send, poll, 0, 0
    order = idx[np.argsort(codes[idx], kind="stable")]
    c, t, inv, k = codes[order], times[order], is_invoke[order], kind[order]
    pair = (c[1:] == c[:-1]) & inv[:-1] & ~inv[1:] & (k[1:] < 2)
    lat = np.maximum(t[1:][pair] - t[:-1][pair], 0)
    which = k[1:][pair]
    edges = np.asarray(EDGES, dtype=np.int64)
    out = []
    for i, hist in ((0, send), (1, poll)):
        lt = lat[which == i]
        if lt.size:
            counts = np.bincount(np.searchsorted(edges, lt, side="right"), minlength=N_BUCKETS)
            hist[:] = counts.tolist()
            out.append(int(lt.max()))
        else:
            out.append(0)
    return send, poll, out[0], out[1]
