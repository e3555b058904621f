"""The knossos multi-register: a map of registers changed by small transactions.

Guarantees:
- An op is `f: "txn"` with a value that is a list of micro-ops
  `[f key value]`, f one of `read`/`r`/`write`/`w` (Jepsen EDN
  `[[:read :x nil] [:write :y 2]]` reads as `[["read", "x", None], ["write", "y", 2]]`).
  Micro-ops apply in order, so a read after a write in the same transaction
  sees the write; the whole transaction is one atomic step.
- The state is the map, frozen; it starts at `initial` (a dict; the knossos
  corpus uses `{"x": 0, "y": 0}`); a key never written reads as null.
- A read micro-op must equal the register exactly (null only for a null or
  absent register) — except when the read's value is unknown: in an
  indeterminate transaction (info, or no completion) reads carry the invoke's
  nil and constrain nothing, while its writes may still have happened; in an
  ok transaction of a Jepsen history, a nil read is unknown (knossos rule,
  see checker.models.register). A transaction left with no constraining
  micro-op is dropped.
- P-compositionality: transactions are grouped into connected components of
  the keys they touch; each component is an independent sub-history.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import FrozenMap, Model, freeze, _sort_key, unknown_f

TXN = ("txn",)
READS = ("read", "r")
WRITES = ("write", "w")


def _micro_ops(v: Any) -> list:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"a multi-register txn value is a list of [f key value], got {v!r}")
    for m in v:
        if not (isinstance(m, (list, tuple)) and len(m) == 3):
            raise ValueError(f"a multi-register micro-op is [f key value], got {m!r}")
        if m[0] not in READS + WRITES:
            raise ValueError(f"a multi-register micro-op is a read or a write, got {m[0]!r}")
    return v


class MultiRegister(Model):
    name = "multi-register"

    def init(self, initial: Any = None) -> Any:
        if initial is None:
            initial = {}
        if not isinstance(initial, dict):
            raise ValueError(f"a multi-register starts from a map, got {initial!r}")
        return freeze(initial)

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f not in TXN:
            raise unknown_f(self.name, f, TXN)
        determinate = result is not UNKNOWN and result is not None
        mops = _micro_ops(result if determinate else value)
        out = []
        for mf, k, v in mops:
            if mf in READS:
                if not determinate or (v is None and nil_unknown):
                    continue
                out.append(("r", freeze(k), freeze(v)))
            else:
                out.append(("w", freeze(k), freeze(v)))
        return tuple(out) if out else None

    def step(self, state: FrozenMap, op: tuple) -> tuple[bool, Any]:
        d = dict(state)
        for kind, k, v in op:
            if kind == "r":
                if d.get(k) != v:
                    return False, state
            else:
                d[k] = v
        return True, FrozenMap(sorted(d.items(), key=lambda kv: _sort_key(kv[0])))

    def partition(self, calls: list) -> dict[Any, list] | None:
        parent: dict[Any, Any] = {}

        def find(k):
            while parent[k] != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k

        keys_of = []
        for c in calls:
            v = c.result if c.result is not UNKNOWN and c.result is not None else c.value
            ks = [freeze(m[1]) for m in _micro_ops(v)]
            keys_of.append(ks)
            for k in ks:
                parent.setdefault(k, k)
            for k in ks[1:]:
                a, b = find(ks[0]), find(k)
                if a != b:
                    parent[b] = a
        roots = {find(k) for k in parent}
        if len(roots) <= 1:
            return None
        groups: dict[Any, list] = {}
        for c, ks in zip(calls, keys_of):
            if not ks:
                continue                    # an empty transaction constrains nothing
            groups.setdefault(find(ks[0]), []).append(c)
        return groups

    def describe_op(self, op: tuple) -> Any:
        return [["read" if kind == "r" else "write", k, v] for kind, k, v in op]
