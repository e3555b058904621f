"""How fast an app run's records went from the seeder's ack to the output.

Guarantees: `progress(h)` gives, for an `AppHistory`, the lag of every value
both acknowledged by the seeder and seen by the tail reader (lag = the time
of the reader's ok poll that first returned it minus the time of the
seeder's ok op that acknowledged it, in ms; negative when the app copied it
before the ack came back) as {"p50", "p99", "max", "count"} (nearest rank:
the value at position floor(q * count) of the sorted lags), or all None when
no value has both; "series": [[t_s, records visible, records acknowledged],
...] with a point at each op that changed a count (distinct values; times in
seconds from the history's first op), and "lag_series": [[t_s, lag_ms],
...] by the time the reader saw each value, each thinned to at most
MAX_POINTS points (the series keeps its last point, the lag series each
stretch's largest lag, so a spike is never thinned away).
"""
from __future__ import annotations

from typing import Any

MAX_POINTS = 400


def nearest_rank(xs: list, q: float) -> Any:
    """xs sorted: the value at position floor(q * len(xs)) (the last for q = 1)."""
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def thin(points: list, n: int = MAX_POINTS) -> list:
    """At most n points, evenly spaced by position, always with the last."""
    if len(points) <= n:
        return points
    step = len(points) / (n - 1)
    return [points[int(i * step)] for i in range(n - 1)] + [points[-1]]


def thin_max(points: list, n: int = MAX_POINTS) -> list:
    """At most n points: of each run of consecutive points, the one with the largest y."""
    if len(points) <= n:
        return points
    step = len(points) / n
    return [max(points[int(i * step):int((i + 1) * step)] or points[-1:], key=lambda p: p[1])
            for i in range(n)]


def progress(h) -> dict:
    t0 = h.t_first or 0
    lags = []                                        # (time seen ns, lag ms)
    acked = h.acked
    for v, (tm, _, _, _) in h.seen.items():
        a = acked.get(v)
        if a is not None and a[3] is not None and tm is not None:
            lags.append((tm, (tm - a[3]) / 1e6))
    lags.sort()
    ms = sorted(x for _, x in lags)
    stats: dict[str, Any] = {"p50": None, "p99": None, "max": None, "count": len(ms)}
    if ms:
        stats.update(p50=round(nearest_rank(ms, 0.5), 3), p99=round(nearest_rank(ms, 0.99), 3),
                     max=round(ms[-1], 3))
    events = sorted([(t, 0, n) for t, n in h.acks] + [(t, 1, n) for t, n in h.sights])
    series, acks, vis = [], 0, 0
    for t, kind, n in events:
        if kind:
            vis += n
        else:
            acks += n
        pt = [round((t - t0) / 1e9, 6), vis, acks]
        if series and series[-1][0] == pt[0]:
            series[-1] = pt
        else:
            series.append(pt)
    return {"lag_ms": stats, "series": thin(series),
            "lag_series": thin_max([[round((t - t0) / 1e9, 6), round(x, 3)] for t, x in lags])}
