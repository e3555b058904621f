"""Visibility anomalies: G1a, precommitted-read, lost-write, and unseen records.

Guarantees (Jepsen's rules):
- G1a (aborted read): an ok poll/txn returned a value whose only send failed.
  Witness: key, value, offset, the failed writer and the first ok reader.
- precommitted-read: one op polled a value it sent itself; Kafka's model says
  no poller sees a record before its transaction commits. An op marked
  `isolation: read_uncommitted` may do so, and the verdict does not count it.
- lost-write: for each key take the highest offset among the values ok polls
  returned (each value at its first offset); every value sitting at or below
  it (at its last offset) that no ok poll returned, and whose send must have
  committed (ok, or info with some value of the same op polled), was lost.
  Witness: key, value, offset, the writer, the bound and the op that read it.
- unseen: acknowledged values no ok poll ever returned. Reported in stats
  (count, per key, the first values); it is an anomaly only when the caller
  asks for it (`strict_unseen`), because a history that ends before its
  consumers catch up has unseen records without losing anything. That differs
  from Jepsen's checker, which counts any unseen record at the end as an
  error — Jepsen's workload drains every partition with final polls first.
"""
from __future__ import annotations

from typing import Any

from checker.kafka.codes import CODE_BITS, CODE_MASK, FAIL, INFO
from checker.kafka.witness import Finding, ref

ALLOW_READ_UNCOMMITTED = "the op polled at read_uncommitted, where seeing its own writes is allowed"
UNSEEN_LISTED = 32


def g1a(keys: dict) -> list[Finding]:
    out = []
    for k, ks in keys.items():
        for v in sorted(ks.failed, key=repr):
            r = ks.read_ok.get(v)
            w = ks.writer.get(v)
            if r is None or w is None or (w & CODE_MASK) != FAIL:
                continue
            off = ks.val2off.get(v)
            out.append(Finding("G1a", {"key": k, "value": v, "offset": off,
                                       "writer": w >> CODE_BITS, "reader": r},
                               [ref(w >> CODE_BITS, k, off), ref(r, k, off)]))
    return out


def precommitted_reads(rows: list) -> list[Finding]:
    out = []
    for idx, k, v, off, isolation in rows:
        out.append(Finding("precommitted-read", {"key": k, "value": v, "offset": off, "op": idx},
                           [ref(idx, k, off)],
                           ALLOW_READ_UNCOMMITTED if isolation == "read_uncommitted" else None))
    return out


def _committed(info_writes: dict, keys: dict, idx: int) -> bool:
    """Jepsen's must-have-committed? for an info op: some value it sent was polled."""
    for k, _, v in info_writes.get(idx, ()):
        ks = keys.get(k)
        if ks is not None and v in ks.read_ok:
            return True
    return False


def lost_writes(keys: dict, info_writes: dict) -> list[Finding]:
    out = []
    for k, ks in keys.items():
        if not ks.read_ok:
            continue
        v2o = ks.val2off
        bound = -1
        for v in ks.read_ok:
            o = v2o.get(v)
            if o is not None and o > bound:
                bound = o
        if bound < 0:
            continue
        max_reader = ks.read_ok.get(ks.off2val.get(bound))
        read_ok, writer, dup = ks.read_ok, ks.writer, ks.dup
        lost = []
        for o, v in ks.off2val.items():
            if o > bound or v in read_ok:
                continue
            if v in dup and max(dup[v]) > bound:
                continue
            w = writer.get(v)
            if w is None:
                continue
            tc = w & CODE_MASK
            if tc == FAIL or (tc == INFO and not _committed(info_writes, keys, w >> CODE_BITS)):
                continue
            lost.append((o, v, w >> CODE_BITS))
        for o, v, widx in sorted(lost, key=lambda x: x[0]):
            out.append(Finding("lost-write", {"key": k, "value": v, "offset": o, "writer": widx,
                                              "max_read_offset": bound, "max_read": max_reader},
                               [ref(widx, k, o), ref(max_reader, k, bound)]))
    return out


def unseen(keys: dict) -> dict:
    """Acknowledged values never polled: {"count", "by_key", "values"}."""
    by_key, values = {}, {}
    for k, ks in keys.items():
        if ks.unread:
            by_key[k] = len(ks.unread)
            try:
                vs = sorted(ks.unread)
            except TypeError:
                vs = sorted(ks.unread, key=repr)
            values[k] = vs[:UNSEEN_LISTED]
    return {"count": sum(by_key.values()), "by_key": by_key, "values": values}


def unseen_findings(keys: dict, summary: dict) -> list[Finding]:
    out = []
    for k, n in summary["by_key"].items():
        ks: Any = keys[k]
        first = summary["values"][k][0]
        w = ks.writer.get(first)
        out.append(Finding("unseen", {"key": k, "count": n, "values": summary["values"][k]},
                           [ref(w >> CODE_BITS, k)] if w is not None else []))
    return out
