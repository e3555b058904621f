"""A key-value store of strings: `get`, `put`, `append`, partitionable by key.

Guarantees:
- The key comes from `Op.key` (Jepsen `:key`), or from a Jepsen independent
  tuple: then the op's value is `[key value]`.
- Porcupine's kv model (anishathalye/porcupine, porcupine_test.go) is the
  specification: a key that was never written holds the empty string, so a
  get of it returns "". A get that returns null is read as "" too (a JSON
  writer's way of saying "nothing there"), and a key holding "" is not kept
  in the state, so "never written" and "holds the empty string" are one
  state, as in Porcupine.
- The state is the map, frozen; it starts at `initial` (a dict of strings,
  default empty).
- `put k v` sets the value. `append k s` concatenates the string s to the
  current value. `get k v` succeeds only when the value equals v exactly. A
  get whose result is unknown constrains nothing and is dropped. Values of
  put/append must be strings.
- P-compositionality: the history splits per key (Porcupine's kvModel) unless
  the caller asks for one partition (Porcupine's kvNoPartitionModel: the
  whole map is the state); the verdict is the same either way, only the
  search's cost differs. A partition starts from `initial` restricted to its
  key.
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
        for k, v in initial.items():
            if not isinstance(v, str):
                raise ValueError(f"a kv store holds strings, got {v!r} at key {k!r}")
        return freeze({k: v for k, v in initial.items() if v != ""})

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
            if result is None:
                result = ""
            if not isinstance(result, str):
                raise ValueError(f"kv get returns a string, got {result!r}")
            return ("g", key, result)
        v = value if result is UNKNOWN or result is None else result
        if not isinstance(v, str):
            raise ValueError(f"kv {f} needs a string value, got {v!r}")
        return ("p" if f == "put" else "a", key, v)

    def step(self, state: FrozenMap, op: tuple) -> tuple[bool, Any]:
        kind, k, v = op
        cur = ""
        for kk, vv in state:
            if kk == k:
                cur = vv
                break
        if kind == "g":
            return cur == v, state
        new = v if kind == "p" else cur + v
        if new == cur:
            return True, state
        items = [kv for kv in state if kv[0] != k]
        if new:
            items.append((k, new))
            if len(items) > 1:
                items.sort(key=lambda kv: _sort_key(kv[0]))
        return True, FrozenMap(items)

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
