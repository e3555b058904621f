"""A grow-only set: `add` an element, `read` the whole set.

Guarantees: the state is a frozenset, starting at `initial` (a list, default
empty). `add x` always succeeds and adds x. `read xs` succeeds only when the
set equals xs as a set (order and duplicates in xs do not matter). A read
whose result is unknown constrains nothing and is dropped.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import Model, freeze, unknown_f

OPS = ("add", "read")


class SetModel(Model):
    name = "set"

    def init(self, initial: Any = None) -> Any:
        return frozenset(freeze(x) for x in (initial or ()))

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f == "add":
            return ("a", freeze(value))
        if f == "read":
            if result is UNKNOWN:
                return None
            if not isinstance(result, (list, tuple, set, frozenset)):
                raise ValueError(f"a set read returns a list of elements, got {result!r}")
            return ("r", frozenset(freeze(x) for x in result))
        raise unknown_f(self.name, f, OPS)

    def step(self, state: frozenset, op: tuple) -> tuple[bool, Any]:
        if op[0] == "a":
            return True, state | {op[1]}
        return op[1] == state, state

    def describe_op(self, op: tuple) -> Any:
        return ["add", op[1]] if op[0] == "a" else ["read", self.describe(op[1])]
