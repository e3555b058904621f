"""One streaming pass over a Kafka history into compact per-key structures.

Guarantees: `Collector.run(dicts)` looks at each op once and keeps no op
objects — only, per key (partition), dicts of ints: offset -> value,
value -> first offset, value -> writer (op index * 4 + 0 ok / 1 info /
2 fail), value -> first ok reader, the set of acknowledged values no ok poll
has read yet; per process the last offsets polled and sent; and short lists
of candidates (offset gaps, inversions) that the finishing analyses
(checker.kafka.offsets, .order, .visibility, .cycles, .producers) settle
once the whole log is known. Memory is proportional to the number of
distinct records, not to the number of ops. Detected on the fly, because
they need nothing but the op itself and the process's previous op: the
`int-nonmonotonic-*`, `nonmonotonic-*` and `precommitted-read` cases, where
ok acks and polls give the offsets. A pair of sends whose offsets only the
whole log tells (an info or fail op's sends, an ok send without its offset)
is kept by value and placed in the log at the end (Jepsen compares positions
in the log built from every send and poll). An assign/subscribe that is ok
or info (it may have taken effect) resets the process's positions, as
Jepsen's poll-skip and nonmonotonic-send do. With a deadline, the pass stops
early and sets `timed_out`. `finish()` adds what only the whole history
tells (offsets of info sends that provably committed).
"""
from __future__ import annotations

import time as _time
from array import array
from typing import Any, Iterable

from checker.kafka.keystate import KeyState
from checker.kafka.lag import RealtimeLag
from checker.kafka.positions import Positions, ShapeError, _rebalanced, _show, odd_value
from checker.kafka.mops import norm_key

_MISS = object()
OK, INFO, FAIL = 0, 1, 2
_TCODE = {"ok": OK, "info": INFO, "fail": FAIL}
UNSEEN_SAMPLE_EVERY = 64


class Collector(Positions):
    """The state of the streaming pass; see the module docstring."""

    def __init__(self, deadline: float | None = None, series: Any = None):
        self.deadline = deadline
        self.series = series
        self.timed_out = False
        self.keys: dict[Any, KeyState] = {}
        self.n_ops = 0
        self.counts: dict[tuple, int] = {}          # (f, type) -> ops
        self.errors: dict[str, int] = {}            # error of fail/info Kafka ops -> count
        self.sent = 0                                # send micro-ops invoked
        self.read_records = 0                        # records returned by ok polls
        self.unseen_n = 0
        self.unseen_series = (array("d"), array("q"))   # time (s), unseen count
        self.t_first: int | None = None
        self.t_last: int | None = None
        # per process
        self.last_reads: dict[Any, dict] = {}       # process -> key -> (offset, op index, value)
        self.last_sends: dict[Any, dict] = {}
        self.subscribed: set = set()                 # processes whose consumer is group-managed
        # found on the fly: (kind, fields...)
        self.int_nm_send: list = []     # (idx, k, off1, off2, v1, v2)
        self.int_nm_poll: list = []     # (idx, k, off1, off2, v1, v2, rebalanced)
        self.nm_send: list = []         # (idx0, idx1, k, off0, off1, v0, v1)
        self.nm_poll: list = []         # (idx0, idx1, k, off0, off1, v0, v1, subscribed)
        self.precommitted: list = []    # (idx, k, v, off, isolation)
        # candidates settled at the end (need the whole log)
        self.int_send_gaps: list = []   # (idx, k, off1, off2, v1, v2)
        # send pairs whose offsets only the whole log can tell (an info or fail op's, or an
        # ok send without its offset): placed by value once the log is known, as Jepsen does
        self.int_send_late: list = []   # (idx, k, v1, v2)
        self.nm_send_late: list = []    # (idx0, idx1, k, v0, v1)
        # Jepsen's transaction graph (Elle's): is there an edge at all? A realtime edge runs
        # from an ok send/poll/txn to an ok or info one invoked after it completed.
        self.first_ok_end: int | None = None
        self.realtime_edge = False
        self.lag = RealtimeLag()
        self.int_poll_gaps: list = []   # (idx, k, off1, off2, v1, v2, rebalanced)
        self.poll_gaps: list = []       # (idx0, idx1, k, off0, off1, v0, v1, subscribed)
        self.info_writes: dict[int, list] = {}      # info op index -> [(k, off, v)]
        self.txn_ops: dict[int, tuple] = {}         # op index -> (type, writes, reads, isolation)
        self.producers = None                        # set by run(): checker.kafka.producers.ProducerTracker

    # ------------------------------------------------------------------ helpers
    def key_state(self, k: Any) -> KeyState:
        ks = self.keys.get(k)
        if ks is None:
            ks = self.keys[k] = KeyState()
        return ks

    @staticmethod
    def record(ks: KeyState, off: int, v: Any) -> None:
        """Note that value v sits at offset off (from an ack or a poll)."""
        ov = ks.off2val.get(off, _MISS)
        if ov is _MISS:
            ks.off2val[off] = v
        elif ov != v:
            ks.conflict.setdefault(off, {ov}).add(v)
        else:
            return
        vo = ks.val2off.get(v)
        if vo is None:
            ks.val2off[v] = off
        elif vo != off:
            ks.dup.setdefault(v, {vo}).add(off)

    # ------------------------------------------------------------------ the pass
    def run(self, dicts: Iterable[dict]) -> None:
        from checker.kafka.producers import ProducerTracker

        self.producers = producers = ProducerTracker()
        lag = self.lag
        lagkeys = lag.keys
        keys, counts, pending = self.keys, self.counts, {}
        record, key_state = self.record, self.key_state
        kcache: dict = {}
        deadline, series = self.deadline, self.series
        us_t, us_n = self.unseen_series
        n = self.n_ops
        kafka_done = 0
        t_first = self.t_first
        t_last = self.t_last
        tm = 0

        def nk(rk):
            if type(rk) is int:
                return rk
            if type(rk) is str:
                k = kcache.get(rk)
                if k is None:
                    k = kcache[rk] = norm_key(rk)
                return k
            return norm_key(rk)

        for d in dicts:
            n += 1
            if deadline is not None and (n & 0x3FFF) == 1 and _time.monotonic() > deadline:
                self.timed_out = True
                break
            if series is not None:
                series.feed(d)
            t = d["type"]
            f = d["f"]
            p = d["process"]
            idx = d["index"]
            if type(f) is not str:
                f = str(f)
            if type(p) is not int and type(p) is not str:
                p = repr(p)
            ck = (f, t)
            counts[ck] = counts.get(ck, 0) + 1
            tm = d.get("time")
            if type(tm) is not int:
                tm = int(tm) if type(tm) is float else None
            if tm is not None:
                if t_first is None:
                    t_first = tm
                t_last = tm
            if t == "invoke":
                pending[p] = (idx, tm)
                if f == "send" or f == "txn":
                    value = d.get("value")
                    if type(value) is list:
                        for mop in value:
                            if type(mop) is list and mop and mop[0] == "send":
                                self.sent += 1
                continue
            pv = pending.pop(p, None)
            inv = pv[0] if pv is not None else None
            if f != "send" and f != "poll" and f != "txn":
                if (f == "assign" or f == "subscribe") and t != "fail":
                    self._reassign(p, f, d, nk, t == "ok")  # an info one may have taken effect (Jepsen)
                if t == "ok":
                    pr = d.get("producer")
                    if type(pr) is dict:
                        producers.live(pr, idx, p)
                continue
            if t != "ok":
                e = d.get("error")
                if e is not None:
                    e = e if type(e) is str else str(e)
                    self.errors[e] = self.errors.get(e, 0) + 1
            value = d.get("value")
            if type(value) is not list:
                if t == "ok":
                    raise ShapeError(idx, f"ok {f}: value must be a list of micro-ops, got {_show(value)}")
                continue
            tc = 0 if t == "ok" else (1 if t == "info" else 2)
            if tc != 2:
                if not self.realtime_edge and inv is not None and self.first_ok_end is not None \
                        and inv > self.first_ok_end:
                    self.realtime_edge = True
                if tc == 0 and self.first_ok_end is None:
                    self.first_ok_end = idx
            wk = None   # key -> [first off, last off, first v, last v] of this op's sends
            rk = None   # key -> [first off, last off, first v, last v] of this op's polls
            ws = None   # [(k, off, v, mop position)]
            rs = None   # [(k, off, v)] only for ops that also send
            mo = None   # key -> highest offset this op sent or polled (realtime lag)
            pos = -1
            for mop in value:
                pos += 1
                if type(mop) is not list or not mop:
                    if tc == 0:
                        raise ShapeError(idx, f"ok {f}: micro-op {pos} must be a non-empty list, got {_show(mop)}")
                    continue
                m0 = mop[0]
                if m0 == "send":
                    if len(mop) != 3 or (tc == 0 and type(mop[1]) is not int and type(mop[1]) is not str
                                         and type(mop[1]) is not list):
                        if tc == 0:
                            raise ShapeError(idx, f"ok {f}: micro-op {pos} must be [\"send\", key, "
                                                  f"[offset, value]], got {_show(mop)}")
                        if len(mop) < 3:
                            continue
                    k = nk(mop[1])
                    x = mop[2]
                    if type(x) is list and len(x) == 2:
                        off, v = x
                        if type(off) is not int:
                            if tc == 0 and off is not None:
                                raise ShapeError(idx, f"ok {f}: micro-op {pos}: offset must be an integer "
                                                      f"or null, got {_show(off)}")
                            off = None
                    else:
                        off, v = None, x
                    if off is not None and tc != 2 and f != "poll":
                        if mo is None:
                            mo = {k: off}
                        elif off > mo.get(k, -1):
                            mo[k] = off
                    if type(v) is not int and type(v) is not str:
                        v = odd_value(v, tc, idx, f"ok {f}: micro-op {pos}: sent value must be an integer "
                                                  f"or a string (or [offset, value]), got {_show(x)}")
                    ks = keys.get(k)
                    if ks is None:
                        ks = key_state(k)
                    w = ks.writer.get(v)
                    if w is None or (w & 3) > tc:
                        ks.writer[v] = idx * 4 + tc
                    if ws is None:
                        ws = []
                    ws.append((k, off, v, pos))
                    if tc == 2:
                        ks.failed.add(v)
                        off = None          # never in the log
                    elif tc == 0:
                        ks.acked += 1
                        if v not in ks.read_ok and v not in ks.unread:
                            ks.unread.add(v)
                            self.unseen_n += 1
                        if off is not None:
                            record(ks, off, v)
                    else:
                        self.info_writes.setdefault(idx, []).append((k, off, v))
                        off = None          # in the log only if the op committed: see finish()
                    if wk is None:
                        wk = {k: [off, off, v, v]}
                    else:
                        e = wk.get(k)
                        if e is None:
                            wk[k] = [off, off, v, v]
                        else:
                            lo = e[1]
                            if off is not None and lo is not None:
                                if off <= lo:
                                    self.int_nm_send.append((idx, k, lo, off, e[3], v))
                                elif off > lo + 1:
                                    self.int_send_gaps.append((idx, k, lo, off, e[3], v))
                            else:
                                self.int_send_late.append((idx, k, e[3], v))
                            e[1] = off
                            e[3] = v
                elif m0 == "poll":
                    if len(mop) < 2 or type(mop[1]) is not dict:
                        if tc == 0 and len(mop) != 1:      # ["poll"] alone: polled nothing
                            raise ShapeError(idx, f"ok {f}: micro-op {pos} must be [\"poll\", "
                                                  f"{{key: [[offset, value], ...]}}], got {_show(mop)}")
                        continue
                    for rkey, pairs in mop[1].items():
                        if type(pairs) is not list or not pairs:
                            if tc == 0 and type(pairs) is not list:
                                raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r} must map to a "
                                                      f"list of [offset, value], got {_show(pairs)}")
                            if tc != 2 and f != "send":       # polled nothing: position -1 (Jepsen)
                                if mo is None:
                                    mo = {}
                                mo.setdefault(nk(rkey), -1)
                            continue
                        k = nk(rkey)
                        ks = keys.get(k)
                        if ks is None:
                            ks = key_state(k)
                        if rk is None:
                            rk = {}
                        e = rk.get(k)
                        if e is None:
                            e = rk[k] = [None, None, None, None]
                        lo = e[1]
                        lv = e[3]
                        pm = -1
                        read_ok = ks.read_ok
                        for pair in pairs:
                            try:
                                off, v = pair
                            except (TypeError, ValueError):
                                if tc == 0:
                                    raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r}: "
                                                          f"expected [offset, value], got {_show(pair)}") from None
                                continue
                            if type(v) is not int and type(v) is not str:
                                v = odd_value(v, tc, idx, f"ok {f}: micro-op {pos}: key {rkey!r}: polled "
                                                          f"value must be an integer or a string, got {_show(pair)}")
                            if type(off) is int:
                                if off > pm:
                                    pm = off
                                ov = ks.off2val.get(off, _MISS)
                                if ov is not v and ov != v:
                                    record(ks, off, v)
                                if lo is not None:
                                    if off <= lo:
                                        self.int_nm_poll.append((idx, k, lo, off, lv, v, _rebalanced(d, k)))
                                    elif off > lo + 1:
                                        self.int_poll_gaps.append((idx, k, lo, off, lv, v, _rebalanced(d, k)))
                                elif e[0] is None:
                                    e[0] = off
                                    e[2] = v
                                lo = off
                            else:
                                if off is not None and tc == 0:
                                    raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r}: offset must "
                                                          f"be an integer or null, got {_show(pair)}")
                                off = None
                            lv = v
                            if tc == 0:
                                self.read_records += 1
                                if v not in read_ok:
                                    read_ok[v] = idx
                                    if off is not None and off > ks.max_read_off:
                                        ks.max_read_off = off
                                    if v in ks.unread:
                                        ks.unread.discard(v)
                                        self.unseen_n -= 1
                            if ws is not None or f == "txn":
                                if rs is None:
                                    rs = []
                                rs.append((k, off, v))
                        e[1] = lo
                        e[3] = lv
                        if tc != 2 and f != "send":
                            if mo is None:
                                mo = {k: pm}
                            elif pm > mo.get(k, -2):
                                mo[k] = pm
            if tm is not None and tc != 2:
                if mo is not None:
                    for k, m in mo.items():     # RealtimeLag.reveal, inlined
                        e = lagkeys.get(k) or lag.key(k)
                        if m > e[0]:
                            e[0] = m
                            e[1].append(m)
                            e[2].append(tm)
                if tc == 0 and f != "send" and pv is not None and pv[1] is not None:
                    lag.poll(p, pv[1], mo)
            # ---- per-process order across ops
            if rk is not None:
                self._poll_order(p, idx, tc, rk)
            if wk is not None and tc != 2:
                self._send_order(p, idx, wk)
            if ws is not None:
                if rs is not None:
                    self._precommitted(idx, ws, rs, d.get("isolation"))
                if tc != 2 and (len(ws) > 1 or (rs and tc == 0)):
                    self.txn_ops[idx] = (tc, [w[:3] for w in ws], (rs or []) if tc == 0 else [],
                                         d.get("isolation"))
                pr = d.get("producer")
                if type(pr) is dict:
                    producers.write(pr, d.get("seq"), idx, inv, tc, ws, p)
            kafka_done += 1
            if not kafka_done & (UNSEEN_SAMPLE_EVERY - 1):
                us_t.append(tm / 1e9 if tm is not None else float(idx))
                us_n.append(self.unseen_n)
        self.n_ops = n
        self.t_first, self.t_last = t_first, t_last
        us_t.append(t_last / 1e9 if t_last is not None else float(n))
        us_n.append(self.unseen_n)

    def finish(self) -> None:
        """Add the offsets of info sends that provably committed (Jepsen's
        must-have-committed?: some value the op sent was polled by an ok op)."""
        keys = self.keys
        for idx, writes in self.info_writes.items():
            if not any(v in keys[k].read_ok for k, _, v in writes):
                continue
            for k, off, v in writes:
                if off is not None:
                    self.record(keys[k], off, v)

