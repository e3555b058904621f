"""Version orders from offsets: inconsistent-offsets, duplicate, and log ranks.

Guarantees: the version order of a key is its known offsets in increasing
order, each holding the first value any op reported there (from acks of ok
sends, acks of info sends that provably committed, and every poll, as in
Jepsen). Gaps in offsets are allowed (transaction markers take offsets).
- inconsistent-offsets: two ops disagree about the value at one offset of a
  key. Witness: key, offset, the values, and for each value an op that
  claimed it there.
- duplicate: one value sits at more than one offset of a key. Witness: key,
  value, the offsets, and the ops that reported it there.
`VersionOrder.between(k, o1, o2)` lists the known records strictly between
two offsets, which the skip analyses use to tell a real skip (records in
between) from a gap left by markers.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from checker.kafka.codes import CODE_BITS
from checker.kafka.witness import Finding, ref

MAX_LISTED = 8


class VersionOrder:
    """Sorted offsets per key, built lazily from the collector's key states."""

    def __init__(self, keys: dict):
        self.keys = keys
        self._sorted: dict[Any, list] = {}

    def offsets(self, k: Any) -> list:
        so = self._sorted.get(k)
        if so is None:
            ks = self.keys.get(k)
            so = self._sorted[k] = sorted(ks.off2val) if ks is not None else []
        return so

    def between(self, k: Any, o1: int, o2: int) -> list:
        """Offsets known strictly between o1 and o2 (o1 < o2)."""
        so = self.offsets(k)
        return so[bisect_right(so, o1):bisect_left(so, o2)]

    def delta(self, k: Any, o1: int, o2: int) -> int:
        """Distance from o1 to o2 counted in known records (Jepsen's index delta)."""
        so = self.offsets(k)
        return bisect_left(so, o2) - bisect_left(so, o1)

    def values(self, k: Any, offsets: list) -> list:
        ks = self.keys[k]
        return [ks.off2val[o] for o in offsets[:MAX_LISTED]]


def _claimants(ks, value: Any) -> list[int]:
    """Ops that can vouch for a value in this key: its writer, its first reader."""
    out = []
    w = ks.writer.get(value)
    if w is not None:
        out.append(w >> CODE_BITS)
    r = ks.read_ok.get(value)
    if r is not None and r not in out:
        out.append(r)
    return out


def inconsistent_offsets(keys: dict) -> list[Finding]:
    out = []
    for k, ks in keys.items():
        for off, vals in sorted(ks.conflict.items()):
            vals = sorted(vals, key=repr)
            refs, claimed = [], {}
            for v in vals:
                ops = _claimants(ks, v)
                claimed[repr(v)] = ops[:1]
                refs += [ref(i, k, off) for i in ops[:1]]
            out.append(Finding("inconsistent-offsets",
                               {"key": k, "offset": off, "values": vals,
                                "claimed_by": [c[0] if c else None for c in claimed.values()]},
                               refs))
    return out


def duplicates(keys: dict) -> list[Finding]:
    out = []
    for k, ks in keys.items():
        for v, offs in ks.dup.items():
            offs = sorted(offs)
            refs = [ref(i, k, *offs) for i in _claimants(ks, v)]
            out.append(Finding("duplicate", {"key": k, "value": v, "count": len(offs),
                                             "offsets": offs}, refs))
    return out
