"""A FIFO queue: `enqueue` at the tail, `dequeue` from the head.

Guarantees: the state is a tuple (head first), starting at `initial` (a
list, default empty). `enqueue x` always succeeds. `dequeue x` succeeds only
when the queue is non-empty and its head equals x, and removes the head; a
dequeue that returns null succeeds only on an empty queue (Jepsen: dequeue of
an empty queue returns nil). A dequeue whose result is unknown (info, no
completion) removes the head if there is one (it may also never have happened:
the search decides). Ops are named `enqueue`/`enq` and `dequeue`/`deq`.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import Model, freeze, unknown_f

ENQ = ("enqueue", "enq")
DEQ = ("dequeue", "deq")


class Queue(Model):
    name = "queue"

    def init(self, initial: Any = None) -> Any:
        return tuple(freeze(x) for x in (initial or ()))

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f in ENQ:
            return ("e", freeze(value))
        if f in DEQ:
            if result is UNKNOWN:
                return ("?",)
            return ("d", freeze(result))
        raise unknown_f(self.name, f, ENQ + DEQ)

    def step(self, state: tuple, op: tuple) -> tuple[bool, Any]:
        kind = op[0]
        if kind == "e":
            return True, state + (op[1],)
        if kind == "?":
            return True, state[1:]
        if not state:
            return op[1] is None, state
        if state[0] == op[1]:
            return True, state[1:]
        return False, state

    def describe_op(self, op: tuple) -> Any:
        return {"e": ["enqueue", op[1] if len(op) > 1 else None],
                "d": ["dequeue", op[1] if len(op) > 1 else None],
                "?": ["dequeue", "unknown"]}[op[0]]
