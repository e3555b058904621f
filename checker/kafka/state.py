"""One streaming pass over a Kafka history into compact per-key structures.

Guarantees: `Collector.run(dicts)` looks at each op once, hands each
completion to the method for its op type (send, poll and txn in
checker.kafka.kafka_ops; assign, subscribe and every other op, nemesis ops
included, here) and keeps no op objects — only, per key (partition), dicts
of ints: offset -> value, value -> first offset, value -> writer (the op
index and its OK / INFO / FAIL code in one int, checker.kafka.codes), value
-> first ok reader, the set of acknowledged values no ok poll
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
from collections.abc import Iterable
from typing import Any

from checker.kafka.codes import FAIL, INFO, OK  # noqa: F401  (the op type codes, also importable from here)
from checker.kafka.hangs import MONITOR_F, OffsetSamples
from checker.kafka.kafka_ops import UNSEEN_SAMPLE_EVERY, KafkaOps, OpScratch
from checker.kafka.keystate import KeyState
from checker.kafka.lag import RealtimeLag
from checker.kafka.positions import Positions, ShapeError  # noqa: F401  (ShapeError: part of this API)


class Collector(KafkaOps, Positions):
    """The state of the streaming pass; see the module docstring."""

    __slots__ = ("_kcache", "_op", "_pending", "counts", "deadline", "errors", "first_ok_end",
                 "info_writes", "int_nm_poll", "int_nm_send", "int_poll_gaps", "int_send_gaps",
                 "int_send_late", "keys", "lag", "last_reads", "last_sends", "n_ops", "nm_poll",
                 "nm_send", "nm_send_late", "poll_gaps", "precommitted", "producers",
                 "read_records", "realtime_edge", "sent", "series", "subscribed", "t_first",
                 "t_last", "timed_out", "txn_ops", "unseen_n", "unseen_series", "offsets")

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
        self.offsets = OffsetSamples()               # the run's LSO / high-watermark samples (checker.kafka.hangs)
        # the pass's own working state (reset by run())
        self._pending: dict = {}                     # process -> (invoke index, invoke time)
        self._kcache: dict = {}                      # key as spelt -> normalized key
        self._op = OpScratch()                       # the send/poll/txn op being completed

    # ------------------------------------------------------------------ the pass
    def run(self, dicts: Iterable[dict]) -> None:
        """Fold every op of `dicts` in, in order: an invoke is remembered per process (and a
        send or txn invoke's sends are counted), a completion goes to the method for its `f`."""
        from checker.kafka.producers import ProducerTracker

        self.producers = ProducerTracker()
        self._pending = pending = {}
        self._kcache = {}
        on_complete = {"send": self._send, "poll": self._poll, "txn": self._txn,
                       "assign": self._assign, "subscribe": self._subscribe, MONITOR_F: self._offsets}
        other = self._other
        counts = self.counts
        deadline, series = self.deadline, self.series
        n, t_first, t_last = self.n_ops, self.t_first, self.t_last
        us_t, us_n = self.unseen_series
        kafka_done = 0
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
            try:
                counts[ck] += 1
            except KeyError:
                counts[ck] = 1
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
            if on_complete.get(f, other)(d, f, t, p, idx, tm, pending.pop(p, None)):
                kafka_done += 1             # a send/poll/txn folded in: sample the unseen count
                if not kafka_done & (UNSEEN_SAMPLE_EVERY - 1):
                    us_t.append(tm / 1e9 if tm is not None else float(idx))
                    us_n.append(self.unseen_n)
        self.n_ops = n
        self.t_first, self.t_last = t_first, t_last
        us_t.append(t_last / 1e9 if t_last is not None else float(n))
        us_n.append(self.unseen_n)

    # ------------------------------------------------------------------ one per op type
    # (send, poll and txn completions: checker.kafka.kafka_ops.KafkaOps)
    def _assign(self, d: dict, f: str, t: Any, p: Any, idx: int, tm: int | None, pv: tuple | None) -> None:
        """An assign completes: unless it failed (an INFO one may have taken effect, as Jepsen
        has it) the process keeps its positions only in the keys still assigned."""
        if t != "fail":
            self._reassign(p, f, d, self._key, t == "ok")
        self._other(d, f, t, p, idx, tm, pv)

    def _subscribe(self, d: dict, f: str, t: Any, p: Any, idx: int, tm: int | None, pv: tuple | None) -> None:
        """A subscribe completes: as an assign, and the process's consumer is group-managed."""
        if t != "fail":
            self._reassign(p, f, d, self._key, t == "ok")
        self._other(d, f, t, p, idx, tm, pv)

    def _offsets(self, d: dict, f: str, t: Any, p: Any, idx: int, tm: int | None, pv: tuple | None) -> None:
        """A sample of the run's offsets monitor (process "monitor"): each key's LSO and high watermark."""
        if p == "monitor":
            self.offsets.add(d.get("value"), tm, self._key)
        else:
            self._other(d, f, t, p, idx, tm, pv)

    def _other(self, d: dict, f: str, t: Any, p: Any, idx: int, tm: int | None, pv: tuple | None) -> None:
        """Any other op completes (nemesis, init-producer, ...): it reads and writes no
        record; an OK one that names its producer shows that producer epoch live."""
        if p == "nemesis":
            self.offsets.nemesis(f, tm)
        if t == "ok":
            pr = d.get("producer")
            if type(pr) is dict:
                self.producers.live(pr, idx, p)

    def finish(self) -> None:
        """Add the offsets of info sends that provably committed (Jepsen's
        must-have-committed?: some value the op sent was polled by an ok op)."""
        keys = self.keys
        for writes in self.info_writes.values():
            if not any(v in keys[k].read_ok for k, _, v in writes):
                continue
            for k, off, v in writes:
                if off is not None:
                    self.record(keys[k], off, v)

