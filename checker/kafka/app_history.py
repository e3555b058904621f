"""What `eoslab app run` recorded, gathered in one pass over its history.

Guarantees: `AppHistory.run(dicts)` reads each op once, in history order,
and keeps only per-value facts (no ops): the strongest outcome of every
value the seeder sent (ok beats info beats fail; a send invoked and never
completed counts as info, Jepsen's indefinite), the input position and ack
time of every acknowledged value, when the tail reader ("reader") first saw
each value and where, every record the final read ("final", read_committed)
returned, the log audit's aborted and open records, the offsets monitor's
samples and the nemesis faults (checker.kafka.hangs.OffsetSamples), and the
app lifecycle counts. Op shapes are those of the app history contract
(checker.kafka.app's docstring); a micro-op of another shape is skipped,
never guessed at. Values are kept as the history spells them (a value that is not
a string or int is keyed by its JSON text).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from checker.kafka.codes import FAIL, INFO, OK, type_code
from checker.kafka.hangs import MONITOR_F, OffsetSamples

SEEDER, READER, FINAL, AUDIT, MONITOR, APP = "seeder", "reader", "final", "audit", "monitor", "app"
PENDING = 3                      # invoked, no completion yet


def hv(v: Any) -> Any:
    """A hashable spelling of a value."""
    return v if type(v) is str or type(v) is int else json.dumps(v, sort_keys=True, default=str)


def _sends(value: Any):
    """(in-p, offset or None, value) of each send micro-op."""
    if type(value) is not list:
        return
    for mop in value:
        if type(mop) is list and len(mop) >= 3 and mop[0] == "send":
            x = mop[2]
            if type(x) is list and len(x) == 2:
                yield mop[1], (x[0] if type(x[0]) is int else None), hv(x[1])
            else:
                yield mop[1], None, hv(x)


def polled(value: Any):
    """(out-p, offset, value) of each polled record."""
    if type(value) is not list:
        return
    for mop in value:
        if type(mop) is list and len(mop) == 2 and mop[0] == "poll" and type(mop[1]) is dict:
            for p, pairs in mop[1].items():
                if type(pairs) is not list:
                    continue
                for pr in pairs:
                    if type(pr) is list and len(pr) == 2 and type(pr[0]) is int:
                        yield p, pr[0], hv(pr[1])


class AppHistory:
    """The facts of one app run; see the module docstring."""

    def __init__(self) -> None:
        self.sent: dict[Any, int] = {}             # value -> strongest code (OK, INFO, FAIL, PENDING)
        self.acked: dict[Any, tuple] = {}          # value -> (in-p, offset, seeder op index, ack time ns)
        self.send_op: dict[Any, int] = {}          # value -> index of the seeder op that first sent it
        self._inflight: dict[Any, list] = {}       # seeder process -> values of its open invoke
        self.seen: dict[Any, tuple] = {}           # value -> (first time ns, out-p, offset, reader op index)
        self.reader_at: dict[tuple, tuple] = {}    # (out-p, offset) -> (value, reader op index)
        self.final: dict[tuple, tuple] = {}        # (out-p, offset) -> (value, final op index)
        self.final_ops = 0                         # final ops of any type
        self.final_ok = 0
        self.audit: dict | None = None             # out-p -> {"aborted": {off: v}, "open": {off: v}}
        self.group_offsets: dict | None = None     # in-p -> the app group's committed offset at the end
        self.samples = OffsetSamples()
        self.acks: list[tuple[int, int]] = []      # (time ns, values newly acknowledged) per seeder ok op
        self.sights: list[tuple[int, int]] = []    # (time ns, values newly visible) per reader ok poll
        self.starts: list[tuple] = []              # (instance, incarnation) per app-start
        self.self_exits: list[dict] = []
        self.seeder_ok = 0
        self.t_first: int | None = None
        self.t_last: int | None = None
        self.n_ops = 0

    def run(self, dicts: Iterable[dict]) -> None:
        for d in dicts:
            self.n_ops += 1
            tm = d.get("time")
            if type(tm) is not int:
                tm = int(tm) if type(tm) is float else None
            if tm is not None:
                if self.t_first is None or tm < self.t_first:
                    self.t_first = tm
                if self.t_last is None or tm > self.t_last:
                    self.t_last = tm
            p, t, f = d["process"], d["type"], d["f"]
            if p == SEEDER and f == "send":
                self._seeder(d, t, tm)
            elif p == READER and f == "poll":
                if t == "ok":
                    self._reader(d, tm)
            elif (p == FINAL or d.get("final") is True) and f == "poll":
                self.final_ops += 1
                if t == "ok":
                    self.final_ok += 1
                    for key in polled(d.get("value")):
                        self.final.setdefault(key[:2], (key[2], d["index"]))
            elif p == AUDIT and f == "log-audit":
                self._audit(d.get("value"))
            elif p == AUDIT and f == "group-offsets":
                v = d.get("value")
                if isinstance(v, dict) and v:
                    self.group_offsets = {str(k): o for k, o in v.items() if type(o) is int}
            elif p == MONITOR and f == MONITOR_F:
                self.samples.add(d.get("value"), tm, str)
            elif p == "nemesis":
                if t != "invoke":
                    self.samples.nemesis(str(f), tm)
            elif p == APP:
                self._app(f, d.get("value"))
        for vals in self._inflight.values():       # never completed: indefinite
            for v in vals:
                self.sent[v] = min(self.sent[v], INFO)
        self._inflight.clear()

    def _seeder(self, d: dict, t: str, tm: int | None) -> None:
        p, idx, sent = d["process"], d["index"], self.sent
        if t == "invoke":
            for v in self._inflight.pop(p, ()):    # a new invoke: the one before never completed
                sent[v] = min(sent[v], INFO)
            vals = []
            for _, _, v in _sends(d.get("value")):
                vals.append(v)
                sent.setdefault(v, PENDING)
                self.send_op.setdefault(v, idx)
            self._inflight[p] = vals
            return
        self._inflight.pop(p, None)
        code = type_code(t)
        if code == OK:
            self.seeder_ok += 1
        new = 0
        for ip, off, v in _sends(d.get("value")):
            sent[v] = min(sent.get(v, PENDING), code)
            self.send_op.setdefault(v, idx)
            if code == OK and v not in self.acked:
                self.acked[v] = (ip, off, idx, tm)
                new += 1
        if new and tm is not None:
            self.acks.append((tm, new))

    def _reader(self, d: dict, tm: int | None) -> None:
        idx, seen, at = d["index"], self.seen, self.reader_at
        new = 0
        for p, off, v in polled(d.get("value")):
            at.setdefault((p, off), (v, idx))
            if v not in seen:
                seen[v] = (tm, p, off, idx)
                new += 1
        if new and tm is not None:
            self.sights.append((tm, new))

    def _audit(self, value: Any) -> None:
        if type(value) is not dict:
            return
        self.audit = audit = self.audit or {}
        for p, facts in value.items():
            if type(facts) is not dict:
                continue
            got = audit.setdefault(p, {"aborted": {}, "open": {}})
            for kind in ("aborted", "open"):
                for pr in facts.get(kind) or ():
                    if type(pr) is list and len(pr) == 2 and type(pr[0]) is int:
                        got[kind][pr[0]] = hv(pr[1])

    def _app(self, f: Any, value: Any) -> None:
        if type(value) is not dict:
            return
        if f == "app-start":
            self.starts.append((value.get("instance"), value.get("incarnation")))
        elif f == "app-exit" and value.get("by") == "self":
            self.self_exits.append({"instance": value.get("instance"),
                                    "incarnation": value.get("incarnation"), "code": value.get("code")})

    def fail_only(self, v: Any) -> bool:
        """Every send of v failed: it was certainly not written."""
        return self.sent.get(v) == FAIL
