"""A key-value store of strings: `get`, `put`, `append`, partitionable by key.

Guarantees:
- The key comes from `Op.key` (Jepsen `:key`), or from a Jepsen independent
  tuple: then the op's value is `[key value]`.
- The state is the map, frozen; it starts at `initial` (a dict, default
  empty); an absent key reads as null.
- `put k v` sets the value. `append k s` concatenates the string s to the
  current value (an absent key counts as ""). `get k v` succeeds only when the
  value equals v exactly (null only for an absent key). A get whose result is
  unknown constrains nothing and is dropped. Values of put/append must be
  strings.
- P-compositionality: the history always splits per key; a partition starts
  from `initial` restricted to its key.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import FrozenMap, Model, _sort_key, freeze, is_pair, partition_by_key, \
    unknown_f

OPS = ("get", "put", "append")


class KV(Model):
    name = "kv"

    def init(self, initial: Any = None) -> Any:
        if initial is None:
            initial = {}
        if not isinstance(initial, dict):
            raise ValueError(f"a kv store starts from a map, got {initial!r}")
        return freeze(initial)

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f not in OPS:
            raise unknown_f(self.name, f, OPS)
        if key is None:
            key, value = _split(value, f)
            if result is not UNKNOWN and result is not None:
                result = _split(result, f)[1]
        key = freeze(key)
        if f == "get":
            if result is UNKNOWN:
                return None
            return ("g", key, freeze(result))
        v = value if result is UNKNOWN or result is None else result
        if not isinstance(v, str):
            raise ValueError(f"kv {f} needs a string value, got {v!r}")
        return ("p" if f == "put" else "a", key, v)

    def step(self, state: FrozenMap, op: tuple) -> tuple[bool, Any]:
        kind, k, v = op
        cur = state.get(k)
        if kind == "g":
            return cur == v, state
        new = v if kind == "p" else (cur or "") + v
        d = dict(state)
        d[k] = new
        return True, FrozenMap(sorted(d.items(), key=lambda kv: _sort_key(kv[0])))

    def partition(self, calls: list) -> dict[Any, list] | None:
        groups = partition_by_key(calls, lambda c: is_pair(c.value))
        if groups is None:
            raise ValueError("kv ops need a key: Op.key, or a value [key value]")
        return groups

    def restrict(self, initial: Any, key: Any) -> Any:
        if isinstance(initial, dict):
            return {k: v for k, v in initial.items() if freeze(k) == key}
        return initial

    def describe_op(self, op: tuple) -> Any:
        return [{"g": "get", "p": "put", "a": "append"}[op[0]], op[1], op[2]]


def _split(v: Any, f: str) -> tuple[Any, Any]:
    if not is_pair(v):
        raise ValueError(f"kv {f} without Op.key needs a value [key value], got {v!r}")
    return v[0], v[1]
