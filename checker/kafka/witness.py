"""Anomaly findings and their witnesses: the ops a person needs to see.

Guarantees: a `Finding` is one anomaly instance — its type (Jepsen's name),
JSON-able facts (keys, offsets, values) and references to the ops involved
(op index, and the keys/offsets of interest in that op; an op named
several times is summarized once, trimmed to all its keys of interest). `materialize` reads
the history once more and attaches to every finding `ops`: a summary of each
referenced op (index, process, type, f, time, error, producer fields) whose
value is trimmed to the key and offsets that matter, so a witness stays small
even when a poll returned thousands of records. Findings keep the order in
which they were found; nothing is dropped except by the caller's cap.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from checker.kafka.mops import norm_key

AROUND = 3            # records kept either side of an offset of interest
MAX_MOPS = 12         # micro-ops kept in an untrimmed value
_KEEP = ("index", "time", "process", "type", "f", "error", "producer", "isolation")


@dataclass
class Finding:
    type: str
    data: dict
    refs: list = field(default_factory=list)     # [(op index, key or None, [offsets])]
    allowed: str | None = None                   # why Kafka's model permits it, if it does

    def to_json(self) -> dict:
        out = dict(self.data)
        if self.allowed:
            out["allowed"] = self.allowed
        return out


def ref(idx: int, key: Any = None, *offsets: Any) -> tuple:
    return (idx, key, [o for o in offsets if o is not None])


def _trim_pairs(pairs: list, offsets: list) -> tuple[list, int]:
    if not offsets:
        keep = pairs if len(pairs) <= 2 * AROUND else pairs[:AROUND] + pairs[-AROUND:]
        return keep, len(pairs) - len(keep)
    lo, hi = min(offsets) - AROUND, max(offsets) + AROUND
    keep = [pr for pr in pairs if isinstance(pr, list) and len(pr) == 2
            and isinstance(pr[0], int) and lo <= pr[0] <= hi]
    return keep, len(pairs) - len(keep)


def trim_value(value: Any, focus: dict | None) -> tuple[Any, int]:
    """An op's value cut down to the keys in `focus` (key -> offsets of interest)
    and, within them, to records near those offsets; returns (value, records elided)."""
    if not isinstance(value, list):
        return value, 0
    if not focus:
        return value[:MAX_MOPS], max(0, len(value) - MAX_MOPS)
    out, elided = [], 0
    for mop in value:
        if not isinstance(mop, list) or not mop:
            continue
        if mop[0] == "send" and len(mop) >= 3:
            if norm_key(mop[1]) in focus:
                out.append(mop)
            else:
                elided += 1
        elif mop[0] == "poll" and len(mop) >= 2 and isinstance(mop[1], dict):
            kept = {}
            for rk, pairs in mop[1].items():
                k = norm_key(rk)
                if k in focus and isinstance(pairs, list):
                    kept[rk], n = _trim_pairs(pairs, focus[k])
                    elided += n
                elif isinstance(pairs, list):
                    elided += len(pairs)
            if kept:
                out.append(["poll", kept])
        else:
            out.append(mop)
    return out, elided


def summarize(d: dict, focus: dict | None) -> dict:
    s = {k: d[k] for k in _KEEP if d.get(k) is not None}
    value, elided = trim_value(d.get("value"), focus)
    s["value"] = value
    if elided:
        s["elided"] = elided
    return s


def materialize(findings: Iterable[Finding], dicts: Callable[[], Iterable[dict]],
                scanners: Iterable[Callable[[dict], None]] = ()) -> None:
    """Attach op summaries to findings, reading the history once more.

    `scanners` are called with every op of that pass too (checks that need a
    second look at the history, such as the zombie-write reader search).
    """
    findings = list(findings)
    want: dict[int, list] = {}
    for fd in findings:
        for idx, key, offs in fd.refs:
            want.setdefault(idx, []).append((key, offs))
    scanners = list(scanners)
    if not want and not scanners:
        return
    got: dict[int, dict] = {}
    for d in dicts():
        for sc in scanners:
            sc(d)
        idx = d.get("index")
        if idx in want:
            got[idx] = d
    for fd in findings:
        focus: dict[int, dict] = {}
        for idx, key, offs in fd.refs:          # one summary per op, all its keys of interest
            f = focus.setdefault(idx, {})
            if key is not None:
                f.setdefault(key, []).extend(offs)
        ops = []
        for idx, f in focus.items():
            d = got.get(idx)
            if d is None:
                ops.append({"index": idx, "missing": True})
                continue
            ops.append(summarize(d, f))
        fd.data["ops"] = ops
