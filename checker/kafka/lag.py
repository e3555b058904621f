"""Realtime lag, as Jepsen's Kafka checker computes it (jepsen.tests.kafka/realtime-lag).

Guarantees: fed the ops in history order, `RealtimeLag` gives, for every ok
poll (or txn) and every key the polling process is positioned on, a lower
bound on how long the newest record that process could have seen had
already stopped being the end of the partition when the poll began:

    lag = max(0, poll invoke time - the time offset o+1 was first known to exist)

where o is the highest offset the process has polled in that key (-1 before
any) and "known to exist" means some ok or info op had sent or polled an
offset at least that high (its completion time). A process's positions
follow its ok assigns (kept for keys still assigned, -1 for new ones) and
ok subscribes (forgotten), as in Jepsen. Lags are in milliseconds; a history
without times has no lag (None). Memory: one entry per increase of a key's
highest known offset, and one float per (poll, key) sample.

`summary()` is the `realtime_lag` entry of check_kafka's result:
`{"max_ms", "p99_ms", "samples", "worst": {"time_s", "process", "key",
"lag_ms"}, "per_key": {key: {"max_ms", "p99_ms", "samples"}}, "series":
[[time_s, max lag ms in that bin], ...]}` (time from the history's first op;
at most SERIES_BINS points). Jepsen's `worst-realtime-lag` is `worst`.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Any

from checker.kafka.mops import json_key

SERIES_BINS = 480


def _p99(xs: array) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, -(-99 * len(s) // 100) - 1))]


class RealtimeLag:
    """See the module docstring. Per key a list [highest known offset, offsets array,
    times array (when each became known), lag samples (ns), their poll invoke times,
    the largest lag, (its time, its process)]."""

    __slots__ = ("keys", "procs")

    def __init__(self) -> None:
        self.keys: dict[Any, list] = {}
        self.procs: dict[Any, dict] = {}                  # process -> key -> highest offset polled

    def key(self, k: Any) -> list:
        e = self.keys.get(k)
        if e is None:
            e = self.keys[k] = [-1, array("q"), array("q"), array("q"), array("q"), -1, None]
        return e

    def reveal(self, offsets: dict, tm: int) -> None:
        """An ok/info op completing at `tm` sent or polled up to these offsets (key -> max).
        (checker.kafka.state inlines this in its loop.)"""
        for k, m in offsets.items():
            e = self.keys.get(k) or self.key(k)
            if m > e[0]:
                e[0] = m
                e[1].append(m)
                e[2].append(tm)

    def assign(self, p: Any, keys: list) -> None:
        old = self.procs.get(p) or {}
        self.procs[p] = {k: old.get(k, -1) for k in keys}

    def subscribe(self, p: Any) -> None:
        self.procs[p] = {}

    def poll(self, p: Any, inv_tm: int, offsets: dict | None) -> None:
        """An ok poll/txn by `p` invoked at `inv_tm` that polled up to `offsets`."""
        pos = self.procs.get(p)
        if pos is None:
            pos = self.procs[p] = {}
        if offsets:
            for k, m in offsets.items():
                if m > pos.get(k, -2):
                    pos[k] = m
        keys = self.keys
        for k, o in pos.items():
            e = keys.get(k) or self.key(k)
            lag = 0
            if e[0] > o:
                lag = inv_tm - e[2][bisect_left(e[1], o + 1)]
                if lag < 0:
                    lag = 0
            e[3].append(lag)
            e[4].append(inv_tm)
            if lag > e[5]:
                e[5] = lag
                e[6] = (inv_tm, p)

    def samples(self) -> list[tuple[int, Any, int]]:
        """Every (poll invoke time, key, lag ns), in time order (Jepsen's realtime-lag list)."""
        out = [(tm, k, lag) for k, e in self.keys.items() for tm, lag in zip(e[4], e[3])]
        out.sort(key=lambda x: x[0])
        return out

    def summary(self, t0: int | None) -> dict:
        per = {k: e for k, e in self.keys.items() if e[3]}
        if not per:
            return {"max_ms": None, "p99_ms": None, "samples": 0, "worst": None, "per_key": {},
                    "series": []}
        base = t0 if t0 is not None else min(e[4][0] for e in per.values())
        every = array("q")
        worst = None
        per_key = {}
        for k, e in sorted(per.items(), key=lambda kv: repr(kv[0])):
            lags = e[3]
            if worst is None or e[5] > worst[0]:
                worst = (e[5], e[6][0], e[6][1], k)
            every.extend(lags)
            per_key[json_key(k)] = {"max_ms": e[5] / 1e6, "p99_ms": _p99(lags) / 1e6, "samples": len(lags)}
        m, tm, p, k = worst
        return {
            "max_ms": m / 1e6,
            "p99_ms": _p99(every) / 1e6,
            "samples": len(every),
            "worst": {"time_s": round((tm - base) / 1e9, 6), "process": p,
                      "key": json_key(k), "lag_ms": m / 1e6},
            "per_key": per_key,
            "series": self._series(per, base),
        }

    @staticmethod
    def _series(per: dict, base: int) -> list:
        t_first = min(e[4][0] for e in per.values())
        t_last = max(e[4][-1] for e in per.values())
        width = max((t_last - t_first) / SERIES_BINS, 1)
        best: dict[int, list] = {}
        for e in per.values():
            for tm, lag in zip(e[4], e[3]):
                b = min(int((tm - t_first) / width), SERIES_BINS - 1)
                cur = best.get(b)
                if cur is None:
                    best[b] = [tm, lag]
                elif lag > cur[1]:
                    cur[0], cur[1] = tm, lag
        return [[round((best[b][0] - base) / 1e9, 6), best[b][1] / 1e6] for b in sorted(best)]
