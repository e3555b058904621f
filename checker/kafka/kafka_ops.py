"""The streaming pass's handling of send, poll and txn completions, micro-op by micro-op.

Guarantees: `KafkaOps` (mixed into checker.kafka.state.Collector) takes one
completed send, poll or txn op and folds it into the per-key state
(checker.kafka.keystate): every send micro-op names its value's writer (an
OK writer replaces an INFO or FAIL one, never the other way round); an OK
send acknowledges its value (unread until an OK poll returns it) and, with
its offset, places it in the log; a FAIL send marks the value failed; an
INFO send's writes wait for `Collector.finish`. Every polled [offset, value]
places the value in the log, and an OK poll marks it read by this op. Within
one op it records the int-* candidates (offset inversions and gaps between
consecutive sends, or polls, of one key); across ops the per-process order
(checker.kafka.positions), precommitted reads, the op's place in the
transaction graph, its producer's writes (checker.kafka.producers) and
Jepsen's realtime lag (checker.kafka.lag). The op type decides three things,
as in Jepsen: which micro-ops move the realtime-lag positions (sends only in
send and txn ops, polls only in poll and txn ops), whether a poll's reads
are kept for the graph (always in a txn op, else only after a send of the
same op) and whether an OK op is a lag sample (poll and txn ops). An OK op
whose value lacks the history contract's shape raises `ShapeError`; an INFO
or FAIL one never does (what it could not know is skipped).
"""
from __future__ import annotations

from typing import Any

from checker.kafka.codes import CODE_BITS, CODE_MASK, FAIL, INFO, OK
from checker.kafka.keystate import KeyState
from checker.kafka.mops import norm_key
from checker.kafka.positions import ShapeError, _rebalanced, _show, odd_value

_MISS = object()
UNSEEN_SAMPLE_EVERY = 64


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


class OpScratch:
    """What the op being completed has sent and polled so far (one per Collector, reset for
    every op). wk / rk: key -> [first offset, last offset, first value, last value] of its
    sends / polls; ws: [(key, offset, value, micro-op position)]; rs: [(key, offset, value)],
    its reads when kept for the graph; mo: key -> highest offset, for the realtime lag."""

    __slots__ = ("mo", "rk", "rs", "wk", "ws")

    def __init__(self) -> None:
        self.wk = self.rk = self.ws = self.rs = self.mo = None


def _completion(name: str, lag_sends: bool, lag_polls: bool, keep_reads: bool, doc: str):
    """The completion method of one Kafka op type. Send, poll and txn ops share one body and
    differ in three rules (see the module docstring), bound here as closure variables so that
    a completion costs the pass one call, not a call and a forward."""

    def complete(self, d: dict, f: str, t: Any, p: Any, idx: int, tm: int | None,
                 pv: tuple | None) -> bool | None:
        # the op itself: its error, its shape, whether it adds a realtime edge
        inv = pv[0] if pv is not None else None
        if t == "ok":
            tc = OK
        else:
            tc = INFO if t == "info" else FAIL
            e = d.get("error")
            if e is not None:
                e = e if type(e) is str else str(e)
                self.errors[e] = self.errors.get(e, 0) + 1
        value = d.get("value")
        if type(value) is not list:
            if tc == OK:
                raise ShapeError(idx, f"ok {f}: value must be a list of micro-ops, got {_show(value)}")
            return None
        if tc != FAIL:
            if not self.realtime_edge and inv is not None and self.first_ok_end is not None \
                    and inv > self.first_ok_end:
                self.realtime_edge = True
            if self.first_ok_end is None and tc == OK:
                self.first_ok_end = idx
        # its micro-ops, in order
        op = self._op
        op.wk = op.rk = op.ws = op.rs = op.mo = None
        pos = -1
        for mop in value:
            pos += 1
            if type(mop) is not list or not mop:
                if tc == OK:
                    raise ShapeError(idx, f"ok {f}: micro-op {pos} must be a non-empty list, got {_show(mop)}")
                continue
            m0 = mop[0]
            if m0 == "send":
                self._send_mop(op, mop, f, tc, idx, pos, lag_sends)
            elif m0 == "poll":
                self._poll_mop(op, mop, d, f, tc, idx, pos, lag_polls, keep_reads or op.ws is not None)
        # then: the realtime lag, the order across ops, the graph, the producer
        mo = op.mo
        if tm is not None and tc != FAIL:
            if mo is not None:
                lag = self.lag
                lagkeys = lag.keys
                for k, m in mo.items():     # RealtimeLag.reveal, inlined
                    e = lagkeys.get(k) or lag.key(k)
                    if m > e[0]:
                        e[0] = m
                        e[1].append(m)
                        e[2].append(tm)
            if lag_polls and tc == OK and pv is not None and pv[1] is not None:
                self.lag.poll(p, pv[1], mo)
        if op.rk is not None:
            self._poll_order(p, idx, tc, op.rk)
        if op.wk is not None and tc != FAIL:
            self._send_order(p, idx, op.wk)
        ws = op.ws
        if ws is not None:
            rs = op.rs
            if rs is not None:
                self._precommitted(idx, ws, rs, d.get("isolation"))
            if tc != FAIL and (len(ws) > 1 or (rs and tc == OK)):
                self.txn_ops[idx] = (tc, [w[:3] for w in ws], (rs or []) if tc == OK else [],
                                     d.get("isolation"))
            pr = d.get("producer")
            if type(pr) is dict:
                self.producers.write(pr, d.get("seq"), idx, inv, tc, ws, p)
        return True

    complete.__name__ = name
    complete.__qualname__ = f"KafkaOps.{name}"
    complete.__code__ = complete.__code__.replace(co_name=name, co_qualname=complete.__qualname__)
    complete.__doc__ = doc        # (so that profiles and tracebacks name the op type's method)
    return complete


class KafkaOps:
    """Send, poll and txn completions; expects the fields of checker.kafka.state.Collector."""

    __slots__ = ()

    # ------------------------------------------------------------------ one per op type
    # (Collector.run's dispatch table; each returns True when it folded the op in, None when
    # an INFO or FAIL op had no micro-op list to fold)
    _send = _completion("_send", True, False, False, """A send op completes. Its sends move the
        realtime-lag positions; a poll in it (if any) does not, and its reads are kept for the
        graph only after a send of the op; it is no lag sample.""")
    _poll = _completion("_poll", False, True, False, """A poll op completes. Its polls move the
        realtime-lag positions and an OK one is a lag sample; a send in it (if any) does not
        move them.""")
    _txn = _completion("_txn", True, True, True, """A txn op completes. Its sends and polls move
        the realtime-lag positions, its reads are all kept for the graph, and an OK one is a
        lag sample.""")

    def _send_mop(self, op: OpScratch, mop: list, f: str, tc: int, idx: int, pos: int, lag: bool) -> None:
        """["send", key, [offset, value]] (or ["send", key, value] when the offset is unknown)."""
        k = mop[1] if len(mop) > 1 else None
        tk = type(k)
        if len(mop) != 3 or (tc == OK and tk is not int and tk is not str and tk is not list):
            if tc == OK:
                raise ShapeError(idx, f"ok {f}: micro-op {pos} must be [\"send\", key, "
                                      f"[offset, value]], got {_show(mop)}")
            if len(mop) < 3:
                return
        if tk is not int:
            k = self._key(k)
        x = mop[2]
        if type(x) is list and len(x) == 2:
            off, v = x
            if type(off) is not int:
                if tc == OK and off is not None:
                    raise ShapeError(idx, f"ok {f}: micro-op {pos}: offset must be an integer "
                                          f"or null, got {_show(off)}")
                off = None
        else:
            off, v = None, x
        if off is not None and tc != FAIL and lag:
            mo = op.mo
            if mo is None:
                op.mo = {k: off}
            elif off > mo.get(k, -1):
                mo[k] = off
        if type(v) is not int and type(v) is not str:
            v = odd_value(v, tc, idx, f"ok {f}: micro-op {pos}: sent value must be an integer "
                                      f"or a string (or [offset, value]), got {_show(x)}")
        ks = self.keys.get(k)
        if ks is None:
            ks = self.key_state(k)
        w = ks.writer.get(v)
        if w is None or (w & CODE_MASK) > tc:
            ks.writer[v] = (idx << CODE_BITS) + tc
        ws = op.ws
        if ws is None:
            ws = op.ws = []
        ws.append((k, off, v, pos))
        if tc == FAIL:
            ks.failed.add(v)
            off = None          # never in the log
        elif tc == OK:
            ks.acked += 1
            if v not in ks.read_ok and v not in ks.unread:
                ks.unread.add(v)
                self.unseen_n += 1
            if off is not None:
                if off not in ks.off2val and v not in ks.val2off:   # a new record: record()'s common case
                    ks.off2val[off] = v
                    ks.val2off[v] = off
                else:
                    record(ks, off, v)
        else:
            self.info_writes.setdefault(idx, []).append((k, off, v))
            off = None          # in the log only if the op committed: see Collector.finish()
        wk = op.wk
        if wk is None:
            op.wk = {k: [off, off, v, v]}
            return
        e = wk.get(k)
        if e is None:
            wk[k] = [off, off, v, v]
            return
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

    def _poll_mop(self, op: OpScratch, mop: list, d: dict, f: str, tc: int, idx: int, pos: int,
                  lag: bool, keep: bool) -> None:
        """["poll", {key: [[offset, value], ...]}] (["poll"] alone: polled nothing)."""
        if len(mop) < 2 or type(mop[1]) is not dict:
            if tc == OK and len(mop) != 1:
                raise ShapeError(idx, f"ok {f}: micro-op {pos} must be [\"poll\", "
                                      f"{{key: [[offset, value], ...]}}], got {_show(mop)}")
            return
        keys, kcache = self.keys, self._kcache
        for rkey, pairs in mop[1].items():
            if type(pairs) is not list or not pairs:
                if tc == OK and type(pairs) is not list:
                    raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r} must map to a "
                                          f"list of [offset, value], got {_show(pairs)}")
                if tc != FAIL and lag:          # polled nothing: position -1 (Jepsen)
                    if op.mo is None:
                        op.mo = {}
                    k = kcache.get(rkey) if type(rkey) is str else None
                    op.mo.setdefault(k if k is not None else self._key(rkey), -1)
                continue
            k = kcache.get(rkey) if type(rkey) is str else None     # self._key, its common case inlined
            if k is None:
                k = self._key(rkey)
            ks = keys.get(k)
            if ks is None:
                ks = self.key_state(k)
            rk = op.rk
            if rk is None:
                rk = op.rk = {}
            e = rk.get(k)
            if e is None:
                e = rk[k] = [None, None, None, None]
            lo = e[1]
            lv = e[3]
            pm = -1
            read_ok, unread, off2val = ks.read_ok, ks.unread, ks.off2val
            for pair in pairs:
                try:
                    off, v = pair
                except (TypeError, ValueError):
                    if tc == OK:
                        raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r}: "
                                              f"expected [offset, value], got {_show(pair)}") from None
                    continue
                if type(v) is not int and type(v) is not str:
                    v = odd_value(v, tc, idx, f"ok {f}: micro-op {pos}: key {rkey!r}: polled "
                                              f"value must be an integer or a string, got {_show(pair)}")
                if type(off) is int:
                    if off > pm:
                        pm = off
                    ov = off2val.get(off, _MISS)
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
                    if off is not None and tc == OK:
                        raise ShapeError(idx, f"ok {f}: micro-op {pos}: key {rkey!r}: offset must "
                                              f"be an integer or null, got {_show(pair)}")
                    off = None
                lv = v
                if tc == OK:
                    self.read_records += 1
                    if v not in read_ok:
                        read_ok[v] = idx
                        if off is not None and off > ks.max_read_off:
                            ks.max_read_off = off
                        if v in unread:
                            unread.discard(v)
                            self.unseen_n -= 1
                if keep:
                    if op.rs is None:
                        op.rs = []
                    op.rs.append((k, off, v))
            e[1] = lo
            e[3] = lv
            if tc != FAIL and lag:
                mo = op.mo
                if mo is None:
                    op.mo = {k: pm}
                elif pm > mo.get(k, -2):
                    mo[k] = pm

    # ------------------------------------------------------------------ helpers
    record = staticmethod(record)

    def key_state(self, k: Any) -> KeyState:
        ks = self.keys.get(k)
        if ks is None:
            ks = self.keys[k] = KeyState()
        return ks

    def _key(self, rk: Any) -> Any:
        """A key as the history spells it, normalized (checker.kafka.mops.norm_key; strings cached)."""
        if type(rk) is int:
            return rk
        if type(rk) is str:
            k = self._kcache.get(rk)
            if k is None:
                k = self._kcache[rk] = norm_key(rk)
            return k
        return norm_key(rk)
