"""The lab's own producer anomalies: producer-order, pid-reuse, zombie-write.

Guarantees (all need the `producer` field of the history contract, see
checker.kafka; ops without it are ignored here):

- producer-order: two records of one producer session in one partition whose
  log order contradicts the producer's order. A session is (pid, epoch) when
  the op names a pid (a negative pid, a producer without idempotence, names
  none), else its `session` label, else its process. The
  producer's order is the per-record `seq` when the op carries one, else the
  order of invocation (then micro-op order). Witness: the two records
  adjacent in producer order (seq, offset, value, op) whose offsets go
  backwards, or two records with one seq at different offsets.
- pid-reuse: one producer id held by two sessions, unless both are the same
  transactional.id and the later one only uses epochs above every epoch of the
  earlier (that is a fence, which is how Kafka reuses a PID). Witness: the pid,
  both sessions (transactional id, epochs) and the first op of each.
- zombie-write: a record sent by epoch e of a pid, in an op *invoked after*
  an ok op of that pid with a higher epoch completed (so it was appended after
  the fence), that an ok poll with `isolation: read_committed` returned.
  Sound but incomplete: a write invoked before the fence and committed after
  it is not reported. Witness: the fencing op, the zombie's send, the reader.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Any

from checker.kafka.codes import FAIL, OK
from checker.kafka.witness import Finding, ref

IMPLICIT_STRIDE = 1 << 16


class ProducerTracker:
    def __init__(self) -> None:
        self.sessions: dict[Any, dict] = {}    # pid -> session -> [tid, min epoch, max epoch, first idx]
        self.live_pos: dict[Any, list] = {}    # pid -> [first ok index] in encounter order
        self.live_max: dict[Any, list] = {}    # pid -> running max epoch over that list
        self.live_ep: dict[Any, dict] = {}     # pid -> epoch -> first ok op index
        self.zombies: list = []                # (idx, k, off, v, pid, epoch, fence idx, fence epoch)
        self.order: dict[tuple, list] = {}     # (k, group, explicit) -> [seqs, offs, idxs, values]

    # ------------------------------------------------------------------ streaming
    def live(self, pr: dict, idx: int, p: Any) -> None:
        """An ok op of (pid, epoch) completed at idx: that epoch was live from here (an OK
        completion that writes nothing)."""
        self.write(pr, None, idx, None, OK, (), p)

    def _live(self, pid: Any, epoch: Any, idx: int) -> None:
        if pid is None or not isinstance(epoch, int):
            return
        eps = self.live_ep.get(pid)
        if eps is None:
            eps = self.live_ep[pid] = {}
            self.live_pos[pid] = []
            self.live_max[pid] = []
        if epoch in eps:
            return
        eps[epoch] = idx
        mx = self.live_max[pid]
        self.live_pos[pid].append(idx)
        mx.append(max(epoch, mx[-1]) if mx else epoch)

    def write(self, pr: dict, seqs: Any, idx: int, inv: int | None, tc: int, ws: list, p: Any) -> None:
        """A send/txn completion (tc: OK, INFO or FAIL) by producer `pr` with writes ws."""
        # the producer session: its pid's sessions note the epochs each used
        pid = pr.get("pid")
        epoch = pr.get("epoch")
        if isinstance(pid, int) and pid < 0:
            pid = None          # a producer without idempotence has no id: it is its session, not pid -1
        session = pr.get("session")
        if session is None:
            session = f"process {p}"
        int_epoch = isinstance(epoch, int)
        if pid is not None:
            try:
                ss = self.sessions.get(pid)
                if ss is None:
                    ss = self.sessions[pid] = {}
            except TypeError:
                pid = ss = None
            if ss is not None:
                s = ss.get(session)
                e = epoch if int_epoch else -1
                if s is None:
                    ss[session] = [pr.get("transactional_id"), e, e, idx]
                else:
                    if e < s[1]:
                        s[1] = e
                    if e > s[2]:
                        s[2] = e
        if tc == FAIL:
            return
        if tc == OK and pid is not None and int_epoch:
            eps = self.live_ep.get(pid)
            if eps is None or epoch not in eps:      # else already live: _live would do nothing
                self._live(pid, epoch, idx)
        if inv is not None and pid is not None and int_epoch:
            mx = self.live_max.get(pid)
            if mx and mx[-1] > epoch:
                j = bisect_left(self.live_pos[pid], inv)     # epochs live before the invoke
                if j and mx[j - 1] > epoch:
                    fence_ep, fence_idx = min((e, i) for e, i in self.live_ep[pid].items()
                                              if e > epoch and i < inv)
                    for k, off, v, _ in ws:
                        self.zombies.append((idx, k, off, v, pid, epoch, fence_idx, fence_ep))
        group = (pid, epoch) if pid is not None else session
        explicit = type(seqs) is list
        order = self.order
        for k, off, v, pos in ws:
            s = seqs[pos] if explicit and pos < len(seqs) else None
            if type(s) is int:
                gk = (k, group, True)
            else:
                gk = (k, group, False)
                s = (inv if inv is not None else idx) * IMPLICIT_STRIDE + pos
            try:
                g = order.get(gk)
            except TypeError:
                return
            if g is None:
                g = order[gk] = [array("q"), array("q"), array("q"), []]
            g[0].append(s)
            g[1].append(off if off is not None else -1)
            g[2].append(idx)
            g[3].append(v)

    # ------------------------------------------------------------------ finishing
    def producer_order(self, keys: dict) -> list[Finding]:
        out: list[Finding] = []
        for (k, group, explicit), (seqs, offs, idxs, vals) in self.order.items():
            if len(seqs) < 2:
                continue
            ks = keys.get(k)
            recs = []
            for i in range(len(seqs)):
                o = offs[i]
                if o < 0:
                    o = ks.val2off.get(vals[i]) if ks is not None else None
                    if o is None:
                        continue
                recs.append((seqs[i], o, idxs[i], vals[i]))
            recs.sort()
            for a, b in zip(recs, recs[1:]):
                if b[1] > a[1] and b[0] != a[0]:
                    continue
                if b[0] == a[0] and (b[1] == a[1] or not explicit):
                    continue
                kind = "sequence-reused" if b[0] == a[0] else "reordered"
                rec = lambda r: {"seq": r[0] if explicit else None, "offset": r[1], "value": r[3], "op": r[2]}
                pid = group[0] if isinstance(group, tuple) else None
                out.append(Finding("producer-order", {
                    "key": k, "kind": kind,
                    "producer": ({"pid": pid, "epoch": group[1]} if isinstance(group, tuple)
                                 else {"session": group}),
                    "order": "seq" if explicit else "invocation",
                    "records": [rec(a), rec(b)]},
                    [ref(a[2], k, a[1]), ref(b[2], k, b[1])]))
        return out

    def pid_reuse(self) -> list[Finding]:
        out: list[Finding] = []
        for pid, ss in self.sessions.items():
            if len(ss) < 2:
                continue
            sessions = sorted(ss.items(), key=lambda kv: kv[1][3])
            for (na, a), (nb, b) in zip(sessions, sessions[1:]):
                if a[0] is not None and a[0] == b[0] and b[1] > a[2]:
                    continue          # same transactional.id, fenced by an epoch bump
                desc = lambda n, s: {"session": n, "transactional_id": s[0],
                                     "epochs": [s[1], s[2]] if s[1] >= 0 else None, "first_op": s[3]}
                out.append(Finding("pid-reuse", {"pid": pid, "sessions": [desc(na, a), desc(nb, b)]},
                                   [ref(a[3]), ref(b[3])]))
        return out

    def zombie_candidates(self, keys: dict) -> dict:
        """(k, v) -> candidate tuple, for zombie records some ok poll returned."""
        out = {}
        for z in self.zombies:
            ks = keys.get(z[1])
            if ks is not None and z[3] in ks.read_ok:
                out.setdefault((z[1], z[3]), z)
        return out


def zombie_scanner(cands: dict, found: list, norm_key, norm_value):
    """A history scanner (see witness.materialize) confirming zombie candidates."""
    seen = set()

    def scan(d: dict) -> None:
        if d.get("type") != "ok" or d.get("isolation") != "read_committed":
            return
        value = d.get("value")
        if not isinstance(value, list):
            return
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "poll" and isinstance(mop[1], dict):
                for rk, pairs in mop[1].items():
                    k = norm_key(rk)
                    for pr in pairs if isinstance(pairs, list) else ():
                        if not (isinstance(pr, list) and len(pr) == 2):
                            continue
                        kv = (k, norm_value(pr[1]))
                        z = cands.get(kv)
                        if z is None or kv in seen:
                            continue
                        seen.add(kv)
                        idx, k, off, v, pid, epoch, fidx, fep = z
                        o = pr[0] if isinstance(pr[0], int) else off
                        found.append(Finding("zombie-write", {
                            "key": k, "value": v, "offset": o, "pid": pid,
                            "epoch": epoch, "fenced_by_epoch": fep,
                            "fence_op": fidx, "writer": idx, "reader": d["index"]},
                            [ref(fidx), ref(idx, k, o), ref(d["index"], k, o)]))
    return scan
