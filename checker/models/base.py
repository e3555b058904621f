"""The model interface every sequential specification implements, and value freezing.

Guarantees: a model is a small, stateless object. Its states are immutable,
hashable values that compare by content (so the linearizability search can
memoise `(linearized ops, state)`), built from JSON-like values by `freeze`
(lists → tuples, dicts → `FrozenMap`) and turned back by `thaw`. The methods:

- `init(initial)` → the state before any op (`initial` is plain JSON data;
  None means the model's empty state, which for registers is null).
- `prepare(f, value, result=UNKNOWN, key=None, nil_unknown=False)` → the
  model's compact, hashable op, or None when the op constrains nothing and
  changes nothing (a read whose result is unknown); raises `ValueError` for
  an op the model does not know. `value` is the invocation's value, `result`
  the ok completion's value or UNKNOWN when the op is indeterminate.
- `step(state, op)` → `(ok, new_state)`; pure.
- `partition(calls)` → `{key: calls}` when the history splits into
  independent sub-histories (P-compositionality), else None.
- `restrict(initial, key)` → the initial value of partition `key`.
- `describe(state)` → plain JSON data for reports.
"""
from __future__ import annotations

from typing import Any, Iterable

from checker.history import UNKNOWN


class FrozenMap(tuple):
    """A dict frozen as a tuple of (key, value) pairs sorted by key; equal iff same content."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is FrozenMap and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def get(self, k: Any, default: Any = None) -> Any:
        for kk, v in self:
            if kk == k:
                return v
        return default


def _sort_key(k: Any) -> tuple:
    return (type(k).__name__, k) if isinstance(k, (str, int, float)) else (type(k).__name__, repr(k))


def freeze(v: Any) -> Any:
    """A JSON-like value as an immutable, hashable value that compares by content."""
    if isinstance(v, list) or isinstance(v, tuple) and not isinstance(v, FrozenMap):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return FrozenMap(sorted(((freeze(k), freeze(x)) for k, x in v.items()),
                                key=lambda kv: _sort_key(kv[0])))
    if isinstance(v, (set, frozenset)):
        return frozenset(freeze(x) for x in v)
    return v


def thaw(v: Any) -> Any:
    """The plain JSON-like value of a frozen value (sets become sorted lists)."""
    if isinstance(v, FrozenMap):
        return {(k if isinstance(k, (str, int, float, bool)) or k is None else repr(k)): thaw(x)
                for k, x in v}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    if isinstance(v, frozenset):
        items = [thaw(x) for x in v]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    return v


def known(result: Any) -> bool:
    return result is not UNKNOWN


def outcome(value: Any, result: Any) -> Any:
    """Knossos: an ok op's value supersedes the invocation's when present."""
    if result is not UNKNOWN and result is not None:
        return result
    return value


def split_tuple(v: Any, what: str) -> tuple[Any, Any]:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return v[0], v[1]
    raise ValueError(f"expected an independent tuple [key value] for {what}, got {v!r}")


class Model:
    """Base class: override `prepare` and `step`; the rest has sensible defaults."""

    name = "model"

    def init(self, initial: Any = None) -> Any:
        return freeze(initial)

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        raise NotImplementedError

    def step(self, state: Any, op: Any) -> tuple[bool, Any]:
        raise NotImplementedError

    def partition(self, calls: list) -> dict[Any, list] | None:
        return None

    def restrict(self, initial: Any, key: Any) -> Any:
        return initial

    def describe(self, state: Any) -> Any:
        return thaw(state)

    def describe_op(self, op: Any) -> Any:
        return thaw(op)

    # convenience for tests and small scripts
    def run(self, state: Any, ops: Iterable[tuple]) -> tuple[bool, Any]:
        """Apply `(f, value[, result])` triples in order; stop at the first that is not ok."""
        for t in ops:
            op = self.prepare(*t) if len(t) > 2 else self.prepare(t[0], t[1], t[1])
            if op is None:
                continue
            ok, state = self.step(state, op)
            if not ok:
                return False, state
        return True, state


def unknown_f(model: str, f: Any, allowed: Iterable[str]) -> ValueError:
    return ValueError(f"the {model} model has no op {f!r} (expected one of {', '.join(allowed)})")


def _key_of(k: Any) -> Any:
    return freeze(k)


def partition_by_key(calls: list, tuple_ok=None) -> dict[Any, list] | None:
    """Split calls by `Call.key`; or, when no call has a key and `tuple_ok(call)` holds for
    every call, by the first element of Jepsen independent tuples `[key value]` (the key is
    then stripped from value and result). None when the history is not keyed."""
    from dataclasses import replace
    if not calls:
        return None
    if any(c.key is not None for c in calls):
        groups: dict[Any, list] = {}
        for c in calls:
            groups.setdefault(_key_of(c.key), []).append(c)
        return groups
    if tuple_ok is None or not all(tuple_ok(c) for c in calls):
        return None
    groups = {}
    for c in calls:
        k, v = c.value[0], c.value[1]
        r = c.result
        if r is not UNKNOWN and r is not None:
            if not (isinstance(r, (list, tuple)) and len(r) == 2):
                raise ValueError(f"op at {c.invoke.line or c.invoke.index}: completion value {r!r} "
                                 f"is not a [key value] tuple like its invoke's")
            r = r[1]
        groups.setdefault(_key_of(k), []).append(replace(c, key=k, value=v, result=r))
    return groups


def is_pair(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 2
