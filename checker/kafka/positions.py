"""What a Kafka history says about positions: per-process read/send positions and op shapes.

Guarantees: `Positions` (mixed into checker.kafka.state.Collector) keeps, per
process, where its last ok poll of each key ended and where its last ok/info
send to each key landed, and records the across-op order candidates
(poll-skip, nonmonotonic-poll/send) as Jepsen defines them; an ok or info
assign/subscribe (an info one may have taken effect) keeps only the keys
still assigned, an ok one also moves the realtime-lag positions.
`ShapeError` is an ok op whose value does not have the history contract's
shape (see checker.kafka); it names the op by index. Nothing here raises on
info/fail ops.
"""
from __future__ import annotations

from typing import Any

from checker.history import HistoryError
from checker.kafka.codes import OK
from checker.kafka.mops import norm_key, norm_value


class Positions:
    """Per-process positions; expects last_reads, last_sends, subscribed, lag and the
    candidate lists of checker.kafka.state.Collector."""

    __slots__ = ()

    def _reassign(self, p: Any, f: str, d: dict, nk, ok: bool) -> None:
        """An ok or info assign/subscribe (an info one may have taken effect): keep only
        the last offsets of keys still assigned, as Jepsen does for poll-skip and
        nonmonotonic-send."""
        value = d.get("value")
        ks = set()
        if type(value) is list:
            for x in value:
                try:
                    ks.add(nk(x))
                except TypeError:
                    pass
        for table in (self.last_reads, self.last_sends):
            m = table.get(p)
            if m:
                for k in [k for k in m if k not in ks]:
                    del m[k]
        if ok:                      # Jepsen's realtime lag follows ok assigns/subscribes only
            if f == "subscribe":
                self.lag.subscribe(p)
            else:
                self.lag.assign(p, list(ks))
        if d.get("seek-to-beginning") or d.get("seek_to_beginning"):
            self.last_reads.pop(p, None)
        if f == "subscribe":
            self.subscribed.add(p)
        else:
            self.subscribed.discard(p)

    def _poll_order(self, p: Any, idx: int, tc: int, rk: dict) -> None:
        lr = self.last_reads.get(p)
        if lr is None:
            lr = self.last_reads[p] = {}
        sub = p in self.subscribed
        for k, e in rk.items():
            first = e[0]
            if first is None:
                continue
            prev = lr.get(k)
            if prev is not None and prev[0] is not None:
                if first <= prev[0]:
                    self.nm_poll.append((prev[1], idx, k, prev[0], first, prev[2], e[2], sub))
                elif first > prev[0] + 1:
                    self.poll_gaps.append((prev[1], idx, k, prev[0], first, prev[2], e[2], sub))
            if tc == OK:
                lr[k] = (e[1], idx, e[3])

    def _send_order(self, p: Any, idx: int, wk: dict) -> None:
        ls = self.last_sends.get(p)
        if ls is None:
            ls = self.last_sends[p] = {}
        for k, e in wk.items():
            prev = ls.get(k)
            if prev is not None:
                if prev[0] is not None and e[0] is not None:
                    if e[0] <= prev[0]:
                        self.nm_send.append((prev[1], idx, k, prev[0], e[0], prev[2], e[2]))
                else:
                    self.nm_send_late.append((prev[1], idx, k, prev[2], e[2]))
            ls[k] = (e[1], idx, e[3])

    def _precommitted(self, idx: int, ws: list, rs: list, isolation: Any) -> None:
        sent = {(w[0], w[2]) for w in ws}
        for k, off, v in rs:
            if (k, v) in sent:
                self.precommitted.append((idx, k, v, off, isolation))
                return


class ShapeError(HistoryError):
    """An ok op whose value does not have the history contract's shape; `index` names the op."""

    def __init__(self, index: Any, msg: str):
        super().__init__(msg)
        self.index = index


def odd_value(v: Any, tc: int, idx: Any, what: str) -> Any:
    """A record value that is neither an int nor a string: bad input in an ok op (tc OK),
    else made hashable (checker.kafka.mops.norm_value)."""
    if tc == OK:
        raise ShapeError(idx, what)
    return norm_value(v)


def _show(x: Any, limit: int = 80) -> str:
    r = repr(x)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def _rebalanced(d: dict, k: Any) -> bool:
    """Did this op's rebalance log (Jepsen's `rebalance-log`) touch key k?"""
    log = d.get("rebalance-log") or d.get("rebalance_log")
    if not isinstance(log, list):
        return False
    for ev in log:
        ks = ev.get("keys") if isinstance(ev, dict) else None
        if isinstance(ks, list) and any(norm_key(x) == k for x in ks):
            return True
    return False
