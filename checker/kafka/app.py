"""`check_app`: the verdict on a user's exactly-once copier, from an `eoslab app run` history.

The app reads an input topic (read_committed) and must copy every input
record to the output topic exactly once. The harness seeds the input
(process "seeder", f "send"), tails the output (process "reader", f "poll",
read_committed), reads the whole output at the end (process "final", ok
polls marked "final": true), audits the output log's COMMIT/ABORT markers
(process "audit", f "log-audit": per "out-<p>", the "aborted" and "open"
records), samples LSO and high watermark (process "monitor", f "offsets"),
injects faults (process "nemesis", start-X / stop-X) and records each app
instance's life (process "app": app-start, app-exit, app-pause, ...).
Input value i is "k<K>:<i>": its record key is "k<K>".

Guarantees: the history (a path, jsonl or .gz, or any iterable of op
dicts) is read once, op by op; only per-value facts are kept
(checker.kafka.app_history). The result is

    {"valid": bool, "anomalies": {type: [witness, ...]}, "stats": {...}, "progress": {...}}

valid iff `anomalies` is empty; at most `cap` witnesses per type
(`stats.anomaly_counts` counts them all). The anomalies, judged against the
final read (read_committed):
- lost-write: a value the seeder got ok for is absent from the output. A
  value whose send was info (or never completed) may be absent
  (stats.indefinite_absent counts those) or present once. When the history
  has the app group's committed offsets at the end (process "audit", f
  "group-offsets": {"in-<p>": offset}), an absent value at or past its
  partition's committed offset is not lost but
- unprocessed: the application never committed past it (it stalled, or
  gave up, before the run's drain ended): a liveness failure, where a
  lost-write (the group committed past a record that is not in the output)
  breaks exactly-once.
- duplicate: a value at two or more output offsets.
- unexpected-value: an output value no seeder op sent, or whose every send
  failed (a fail is certain: it was not written); the reader's polls count too.
- reordered (ordered=True only): two values of one record key, a before b in
  one input partition, in one output partition with b at the lower offset.
  A key's values spread over output partitions are not reordered
  (stats.keys_split_across_partitions counts such keys).
- G1a: the final read (or the tail reader) returned a record at an offset the
  log audit lists as aborted. No audit, no G1a claim (stats.aborted_in_log None).
- hanging-transaction: checker.kafka.hangs over the monitor's samples, with
  `hang_threshold_s` (None: hangs.DEFAULT_THRESHOLD_S).
`progress` is checker.kafka.app_progress's (lag from ack to visibility).
Bad input raises HistoryError: no seeder ok op, no final read, a final read
that never completed, or a malformed op.
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from typing import Any

from checker.history import HistoryError
from checker.kafka.app_history import AppHistory
from checker.kafka.app_progress import progress
from checker.kafka.check import _jsonable, as_source
from checker.kafka.hangs import (
    DEFAULT_THRESHOLD_S,
    HANGING,
    hanging_transactions,
    stalls_at_end,
)
from checker.kafka.source import HistorySource, op_dict
from checker.kafka.source import ordered as in_order

LOST, DUPLICATE, UNEXPECTED, REORDERED, G1A = "lost-write", "duplicate", "unexpected-value", "reordered", "G1a"
UNPROCESSED = "unprocessed"
TYPES_ORDER = (LOST, UNPROCESSED, DUPLICATE, UNEXPECTED, REORDERED, G1A, HANGING)
MAX_WITNESSES = 32
_VALUE = re.compile(r"^(k\d+):(\d+)$")


def record_key(v: Any) -> str | None:
    """"k<K>" of a value "k<K>:<i>"; None for a value of another form."""
    m = _VALUE.match(v) if type(v) is str else None
    return m.group(1) if m else None


def op_dicts(history: Any) -> Iterable[dict]:
    """The history's ops as dicts, in order (a path or HistorySource re-readable; ops read once)."""
    if isinstance(history, (str, os.PathLike, HistorySource)):
        return as_source(history).dicts()
    return in_order((op_dict(op, i) for i, op in enumerate(history)),
                   lambda op, i: f"op {i} (index {op.get('index')})")


def _pos_key(pos: tuple) -> tuple:
    p, off = pos
    return (str(p), off)


def output_positions(h: AppHistory) -> dict[Any, list]:
    """value -> its [out-p, offset] positions in the final read, in partition and offset order."""
    out: dict[Any, list] = {}
    for pos in sorted(h.final, key=_pos_key):
        out.setdefault(h.final[pos][0], []).append(list(pos))
    return out


def lost_writes(h: AppHistory, out: dict) -> tuple[list[dict], list[dict]]:
    """(lost, unprocessed): absent acknowledged values, split by the group's committed offsets when known."""
    lost, unprocessed = [], []
    committed = h.group_offsets
    for v, (ip, off, idx, _) in h.acked.items():
        if v in out:
            continue
        w = {"value": v, "in-p": ip, "offset": off, "op": idx, "seen_by_reader": v in h.seen}
        if committed is not None and off >= committed.get(ip, -1) >= -1 and not w["seen_by_reader"]:
            unprocessed.append({**w, "group_committed": committed.get(ip, -1)})
        else:
            lost.append(w)
    return lost, unprocessed


def duplicates(out: dict) -> list[dict]:
    return [{"value": v, "offsets": ps, "count": len(ps)} for v, ps in out.items() if len(ps) > 1]


def _why_unexpected(h: AppHistory, v: Any) -> str | None:
    if v in h.acked:
        return None
    code = h.sent.get(v)
    if code is None:
        return "no seeder op sent it" + ("" if record_key(v) else " (not of the form k<K>:<i>)")
    if h.fail_only(v):
        return f"the seeder's send failed definitely (op {h.send_op.get(v)})"
    return None


def unexpected_values(h: AppHistory, out: dict) -> list[dict]:
    found = []
    for v, ps in out.items():
        why = _why_unexpected(h, v)
        if why:
            found.append({"value": v, "where": ps[0], "positions": len(ps), "read_by": "final",
                          "op": h.final[tuple(ps[0])][1], "reason": why})
    for v, (_, p, off, idx) in h.seen.items():
        if v not in out:
            why = _why_unexpected(h, v)
            if why:
                found.append({"value": v, "where": [p, off], "read_by": "reader", "op": idx, "reason": why})
    return found


def aborted_reads(h: AppHistory) -> list[dict]:
    if h.audit is None:
        return []
    found, done = [], set()
    for who, reads in (("final", h.final), ("reader", h.reader_at)):
        for (p, off), (v, idx) in sorted(reads.items(), key=lambda kv: _pos_key(kv[0])):
            aborted = (h.audit.get(p) or {}).get("aborted") or {}
            if off in aborted and (p, off) not in done:
                done.add((p, off))
                w = {"value": v, "out-p": p, "offset": off, "read_by": who, "op": idx}
                if aborted[off] != v:
                    w["aborted_value"] = aborted[off]
                found.append(w)
    return found


def reorderings(h: AppHistory, out: dict) -> tuple[list[dict], int]:
    """(reordered witnesses, keys whose values sit in more than one output partition)."""
    groups: dict[tuple, list] = {}
    parts: dict[str, set] = {}
    for v, ps in out.items():
        k = record_key(v)
        if k is None:
            continue
        parts.setdefault(k, set()).update(p for p, _ in ps)
        a = h.acked.get(v)
        if a is None or a[1] is None:
            continue                               # no input offset: nothing to order by
        p, off = ps[0]
        groups.setdefault((k, a[0], p), []).append((a[1], off, v))
    found = []
    for (k, ip, p), recs in groups.items():
        recs.sort()
        hi = None                                  # the record landed highest so far
        for rec in recs:
            if hi is not None and rec[1] < hi[1]:
                found.append({"key": k, "values": [hi[2], rec[2]],
                              "input": [[ip, hi[0]], [ip, rec[0]]], "output": [[p, hi[1]], [p, rec[1]]]})
            elif hi is None or rec[1] > hi[1]:
                hi = rec
    return found, sum(1 for ps in parts.values() if len(ps) > 1)


def hangs(h: AppHistory, threshold: float) -> list[dict]:
    found = []
    for fd in hanging_transactions(h.samples, {}, threshold, h.t_first):
        w = fd.to_json()
        opened = ((h.audit or {}).get(w["key"]) or {}).get("open") or {}
        if w["offset"] in opened:
            w["open_record"] = opened[w["offset"]]
        found.append(w)
    return found


def _audit_count(h: AppHistory, kind: str) -> int | None:
    return None if h.audit is None else sum(len(a[kind]) for a in h.audit.values())


def _stats(h: AppHistory, out: dict, split: int, counts: dict) -> dict:
    t0 = h.t_first or 0
    instances = {i for i, _ in h.starts}
    sights = [t for t, _ in h.sights]
    indefinite = [v for v, c in h.sent.items() if v not in h.acked and not h.fail_only(v)]
    stats = {
        "input_sent": len(h.sent),
        "input_acknowledged": len(h.acked),
        "input_indefinite": len(indefinite),
        "input_failed": sum(1 for v in h.sent if h.fail_only(v)),
        "indefinite_absent": sum(1 for v in indefinite if v not in out),
        "output_records": len(h.final),
        "output_unique": len(out),
        "anomaly_counts": counts,
        "aborted_in_log": _audit_count(h, "aborted"),
        "open_in_log": _audit_count(h, "open"),
        "keys_split_across_partitions": split,
        "instances": len(instances),
        "restarts": len(h.starts) - len(instances),
        "app_exits_by_self": h.self_exits,
        "first_output_s": round((min(sights) - t0) / 1e9, 6) if sights else None,
        "last_output_s": round((max(sights) - t0) / 1e9, 6) if sights else None,
        "ops": h.n_ops,
        "time_span_s": round((h.t_last - t0) / 1e9, 6) if h.t_last is not None else None,
    }
    if not h.seen:
        stats["no_output"] = True
    return stats


def check_app(history: Any, *, ordered: bool = False, hang_threshold_s: float | None = None,
              cap: int = MAX_WITNESSES) -> dict:
    """Judge an app run's history; see the module docstring for the rules and the result."""
    t_start = time.monotonic()
    h = AppHistory()
    h.run(op_dicts(history))
    if not h.seeder_ok:
        raise HistoryError("the history has no ok send from the seeder: no input was acknowledged, "
                           "so there is nothing to judge the app by")
    if not h.final_ops:
        raise HistoryError("the history has no final read of the output")
    if not h.final_ok:
        raise HistoryError(f"the final read of the output never completed ({h.final_ops} final ops, none ok)")
    out = output_positions(h)
    reordered, split = reorderings(h, out)
    threshold = DEFAULT_THRESHOLD_S if hang_threshold_s is None else hang_threshold_s
    lost, unprocessed = lost_writes(h, out)
    found = {LOST: lost, UNPROCESSED: unprocessed, DUPLICATE: duplicates(out), UNEXPECTED: unexpected_values(h, out),
             REORDERED: reordered if ordered else [], G1A: aborted_reads(h), HANGING: hangs(h, threshold)}
    anomalies = {t: ws[:cap] for t in TYPES_ORDER if (ws := found[t])}
    counts = {t: len(found[t]) for t in anomalies}
    stats = _stats(h, out, split, counts)
    stats["ordered"] = ordered
    if not ordered and reordered:
        stats["reordered_not_judged"] = len(reordered)
    stats["hang_threshold_s"] = threshold
    stats["offset_samples"] = sum(len(v) for v in h.samples.by_key.values())
    stats["lso_behind_at_end"] = stalls_at_end(h.samples)
    stats["elapsed_s"] = round(time.monotonic() - t_start, 6)
    return _jsonable({"valid": not anomalies, "anomalies": anomalies, "stats": stats, "progress": progress(h)})
