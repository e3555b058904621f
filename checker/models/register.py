"""Single registers: `register` (read/write) and `cas-register` (read/write/cas).

Guarantees:
- The state is the register's value, frozen; it starts at `initial` (null
  unless told; the knossos corpus uses 0 for cas-register).
- `write v` always succeeds and sets v. `cas [old new]` succeeds only when
  the state equals `old`, and then sets `new`; a cas that does not match is not
  ok (a *failed* cas never reaches the model: `fail` ops did not happen).
- `read v` succeeds only when the state equals v exactly: a read of null
  matches only a null register. A read whose result is unknown (an `info` read,
  an invoke with no completion) constrains nothing and is dropped
  (`prepare` returns None). Knossos rule, for Jepsen histories only: an `ok`
  read whose value is nil in a history read from EDN or a Jepsen log (marked
  `nil_reads_unknown` by those readers) is also unknown — the knossos corpus
  has such reads in `good/` histories whose register is never nil (e.g. the
  first op of memstress3-12), and knossos names cas-failure.edn's failing op
  at index 491, after an `:ok :read nil` at index 6 that strict reads would
  already reject.
- Keyed histories split per key (P-compositionality): by `Op.key` when the
  history has keys, or by Jepsen independent tuples when every op's value is
  `[key value]` (for cas `[key [old new]]`); each key is then its own register
  starting at `initial`.
- Ops are named `read`/`r`, `write`/`w`, `cas`.
"""
from __future__ import annotations

from typing import Any

from checker.history import UNKNOWN
from checker.models.base import Model, freeze, is_pair, outcome, partition_by_key, unknown_f

READS = ("read", "r")
WRITES = ("write", "w")


class Register(Model):
    name = "register"
    ops = READS + WRITES

    def prepare(self, f: Any, value: Any, result: Any = UNKNOWN, key: Any = None,
                nil_unknown: bool = False) -> Any:
        if f in READS:
            if result is UNKNOWN or (result is None and nil_unknown):
                return None
            return ("r", freeze(result))
        if f in WRITES:
            return ("w", freeze(outcome(value, result)))
        return self._prepare_other(f, value, result)

    def _prepare_other(self, f: Any, value: Any, result: Any) -> Any:
        raise unknown_f(self.name, f, self.ops)

    def step(self, state: Any, op: tuple) -> tuple[bool, Any]:
        kind = op[0]
        if kind == "r":
            return op[1] == state, state
        if kind == "w":
            return True, op[1]
        if op[1] == state:                       # cas
            return True, op[2]
        return False, state

    def _tuple_ok(self, call) -> bool:
        return is_pair(call.value)

    def partition(self, calls: list) -> dict[Any, list] | None:
        return partition_by_key(calls, self._tuple_ok)

    def describe_op(self, op: tuple) -> Any:
        names = {"r": "read", "w": "write", "c": "cas"}
        rest = [self.describe(x) for x in op[1:]]
        return [names[op[0]], rest[0] if len(rest) == 1 else rest]


class CasRegister(Register):
    name = "cas-register"
    ops = READS + WRITES + ("cas",)

    def _prepare_other(self, f: Any, value: Any, result: Any) -> Any:
        if f == "cas":
            v = outcome(value, result)
            if not is_pair(v):
                raise ValueError(f"cas needs a value [old new], got {v!r}")
            return ("c", freeze(v[0]), freeze(v[1]))
        raise unknown_f(self.name, f, self.ops)

    def _tuple_ok(self, call) -> bool:
        if not is_pair(call.value):
            return False
        if call.f == "cas":
            return is_pair(call.value[1])
        return True
