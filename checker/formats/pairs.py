"""Pairing invocations with completions, per client process (Jepsen/Knossos rules).

Guarantees:
- `pair(ops)` returns `(invoke, completion or None)` for every client
  invocation, in invocation order; `fail`, `info` and `ok` completions are all
  kept (the caller decides). Nemesis ops (any non-int process) are ignored.
- A second invoke by a process whose previous op is still open, a completion
  with no open invoke, and a completion whose `f` differs from its invoke's
  raise `HistoryError` naming the line (or the op index when there is none).
  A process may invoke again after an `info` completion.
- `pair_calls(ops)` applies the semantics the checkers use: a `fail` op did not
  happen and is dropped; an `ok` op happened between its invoke and its
  completion; an `info` op and an invoke that never completes may have
  happened at any time after the invoke, or never (`end` is None, `result` is
  UNKNOWN). `value` is the invocation's value; `result` is the ok completion's
  value (knossos: an ok op's value supersedes the invoke's when present).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from checker.history import NIL_READS_UNKNOWN, UNKNOWN, HistoryError, Op


def where(op: Op) -> str:
    return f"line {op.line}" if op.line is not None else f"op index {op.index}"


@dataclass(slots=True)
class Call:
    """One client operation: its invoke, its completion and when they happened."""

    invoke: Op
    completion: Op | None
    start: int            # position of the invoke among all ops of the history (0-based)
    end: int | None       # position of the completion; None when indeterminate
    key: Any              # Op.key of the invoke (or completion); models may set it from a tuple
    value: Any            # the invocation's value
    result: Any           # the ok completion's value, UNKNOWN when indeterminate
    nil_unknown: bool     # Jepsen dialect: nil read values in `result` mean "unknown"

    @property
    def process(self) -> Any:
        return self.invoke.process

    @property
    def f(self) -> Any:
        return self.invoke.f

    @property
    def indeterminate(self) -> bool:
        return self.end is None


def resolved_value(invoke: Op, completion: Op | None) -> Any:
    """The op's value: an ok completion's value when it has one, else the invoke's."""
    if completion is not None and completion.type == "ok" and completion.value is not None:
        return completion.value
    return invoke.value


def _pair_positions(ops: Iterable[Op]) -> list[list]:
    """[invoke, completion | None, start, end | None] per client invocation, in invoke order."""
    out: list[list] = []
    pending: dict[Any, int] = {}
    for pos, op in enumerate(ops):
        if not isinstance(op.process, int) or isinstance(op.process, bool):
            continue
        p = op.process
        if op.type == "invoke":
            slot = pending.get(p)
            if slot is not None:
                prev = out[slot][0]
                raise HistoryError(f"{where(op)}: process {p} invokes {op.f!r} while its "
                                   f"{prev.f!r} from {where(prev)} has not completed (double invoke)")
            pending[p] = len(out)
            out.append([op, None, pos, None])
        else:
            slot = pending.pop(p, None)
            if slot is None:
                raise HistoryError(f"{where(op)}: process {p} completes {op.f!r} ({op.type}) "
                                   f"without an invoke")
            entry = out[slot]
            inv = entry[0]
            if op.f != inv.f:
                raise HistoryError(f"{where(op)}: process {p} completes {op.f!r} but invoked "
                                   f"{inv.f!r} at {where(inv)}")
            entry[1] = op
            entry[3] = pos
    return out


def pair(ops: Iterable[Op]) -> list[tuple[Op, Op | None]]:
    """(invoke, completion or None) for every client invocation, in invocation order."""
    return [(e[0], e[1]) for e in _pair_positions(ops)]


def pair_calls(ops: Iterable[Op]) -> list[Call]:
    """The calls a checker must explain: ok and indeterminate ops (fail ops dropped)."""
    calls = []
    for inv, comp, start, end in _pair_positions(ops):
        ctype = comp.type if comp is not None else None
        if ctype == "fail":
            continue
        key = inv.key if inv.key is not None else (comp.key if comp is not None else None)
        if ctype == "ok":
            calls.append(Call(inv, comp, start, end, key, inv.value, comp.value,
                              bool(comp.extra.get(NIL_READS_UNKNOWN))))
        else:
            calls.append(Call(inv, comp, start, None, key, inv.value, UNKNOWN, False))
    return calls
