"""A partition log, Kafka style: `append` returns an offset, `read` returns the log.

Guarantees:
- The state is the tuple of records in offset order, starting at `initial`
  (a list of records, default empty).
- `append`: the invocation's value is the record; the ok completion's value is
  the offset it got (an int, or `[record, offset]`). It succeeds only when
  that offset is the log's current length, and appends the record. An append
  with no known offset (null, info, no completion) appends at the end.
- `read`: the invocation's value is the offset to read from (null = 0); the
  ok completion's value is the list of records from there to the end of the
  log. It succeeds only when that list equals the log's suffix exactly, so a
  read of the whole log (from 0) must return the whole log, a prefix of what
  the log will become. A read whose result is unknown is dropped.
- P-compositionality: split per `Op.key` (one key per topic-partition) when the
  history has keys.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import Model, freeze, is_pair, partition_by_key, unknown_f

OPS = ("append", "read")


def _offset(result: Any) -> int | None:
    if result is UNKNOWN or result is None:
        return None
    if is_pair(result):
        result = result[1]
    if isinstance(result, int) and not isinstance(result, bool) and result >= 0:
        return result
    raise ValueError(f"an append completes with its offset (an int >= 0, or [record offset]), "
                     f"got {result!r}")


class PartitionLog(Model):
    name = "log"

    def init(self, initial: Any = None) -> Any:
        return tuple(freeze(x) for x in (initial or ()))

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f == "append":
            return ("a", freeze(value), _offset(result))
        if f == "read":
            if result is UNKNOWN:
                return None
            start = value if value is not None else 0
            if not (isinstance(start, int) and not isinstance(start, bool) and start >= 0):
                raise ValueError(f"a log read is invoked with the offset to read from, got {value!r}")
            if not isinstance(result, (list, tuple)):
                raise ValueError(f"a log read returns a list of records, got {result!r}")
            return ("r", start, freeze(result))
        raise unknown_f(self.name, f, OPS)

    def step(self, state: tuple, op: tuple) -> tuple[bool, Any]:
        if op[0] == "a":
            off = op[2]
            if off is None or off == len(state):
                return True, state + (op[1],)
            return False, state
        return state[op[1]:] == op[2], state

    def partition(self, calls: list) -> dict[Any, list] | None:
        return partition_by_key(calls)

    def describe_op(self, op: tuple) -> Any:
        if op[0] == "a":
            return ["append", self.describe(op[1]), op[2]]
        return ["read", op[1], self.describe(op[2])]
