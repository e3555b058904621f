"""`check_linearizable`: is a history linearizable with respect to a model?

Guarantees: reads the ops once (any iterable, e.g. `open_history(...)`),
pairs them (checker.formats.pairs: fail ops did not happen; info ops and
invokes that never complete may take effect at any time after the invoke, or
never), lets the model drop the ops that constrain nothing and split the
history into independent partitions (P-compositionality: a history is
linearizable iff every partition is; `partition=False` keeps it whole), and
runs the exact search of checker.linear.search on each, smallest first, under
one shared deadline.

Returns `{"valid": True | False | "unknown", "anomalies": {...}, "stats": {...}}`.
"unknown" when the time limit ran out before every partition was decided
and none was found invalid, or when there is nothing to check (a history
without a single op: knossos would say valid, the lab says it cannot tell). Indices must increase from op to op (a duplicate is
bad input). When invalid, `anomalies["nonlinearizable"]` names
the op no linearization gets past — `op`: its completion's `index`, its
`invoke_index`, `process`, `type`, `f`, `value` (the completion's value for an
ok op, else the invoke's), `line` — the `key` of its partition (or None),
`prefix`: the invoke indices, in linearization order, of the ops linearized
in a configuration that reached it (the longest linearizable prefix found),
`states`: a few model states reachable just before it, and `timeline`: the
partition's ops around it (at most TIMELINE_MAX) with their positions, their
place in that prefix and which one fails, for checker.report_linear. Bad input (double
invoke, orphan completion, an op the model does not know) raises
`HistoryError` naming the line; an unknown model raises `ValueError`.
"""
from __future__ import annotations

import json
import time
from typing import Any, Iterable

from checker.formats.pairs import Call, pair_calls, resolved_value, where
from checker.history import HistoryError, Op
from checker.kafka.source import ordered
from checker.linear.search import search
from checker.models import Model, get_model, thaw


class _Counted:
    def __init__(self, ops: Iterable[Op]):
        self.ops = ops
        self.n = 0

    def __iter__(self):
        for op in ordered(self.ops, lambda op, i: f"line {op.line}" if op.line else f"op {i}"):
            self.n += 1
            yield op


def _prepare(model: Model, calls: list[Call]) -> tuple[list, list[Call]]:
    prepared, kept = [], []
    for c in calls:
        try:
            op = model.prepare(c.f, c.value, c.result, c.key, c.nil_unknown)
        except ValueError as e:
            raise HistoryError(f"{where(c.invoke)}: {e}") from None
        if op is not None:
            prepared.append(op)
            kept.append(c)
    return prepared, kept


TIMELINE_BEFORE = 40      # ops of the failing partition drawn before the failing one (by invoke)
TIMELINE_MAX = 120


def _clip(v: Any, limit: int = 200) -> Any:
    """A value as is when its JSON is short, else the start of its JSON text (a drawing label)."""
    try:
        text = json.dumps(v, default=str)
    except (TypeError, ValueError):
        text = repr(v)
    return v if len(text) <= limit else text[:limit - 1] + "…"


def _timeline(calls: list[Call], fail: int, prefix: list[int]) -> list[dict]:
    """The failing partition's ops around the failing one, for the report's drawing:
    each with its invoke/completion positions (`end` None: indeterminate), its place in
    the linearizable prefix (`order`, or None) and whether it is the failing op."""
    c = calls[fail]
    order = {i: n for n, i in enumerate(prefix)}
    by_start = sorted(range(len(calls)), key=lambda i: calls[i].start)
    at = by_start.index(fail)
    lo = calls[by_start[max(0, at - TIMELINE_BEFORE)]].start
    hi = c.end
    chosen = [i for i in by_start
              if calls[i].start <= hi and (calls[i].end is None or calls[i].end >= lo)]
    if len(chosen) > TIMELINE_MAX:
        keep = set(sorted(chosen, key=lambda i: abs(calls[i].start - c.start))[:TIMELINE_MAX])
        chosen = [i for i in chosen if i in keep]
    out = []
    for i in chosen:
        x = calls[i]
        comp = x.completion
        out.append({"index": x.invoke.index, "process": x.process, "f": x.f,
                    "value": _clip(resolved_value(x.invoke, comp) if comp is not None else x.value),
                    "type": comp.type if comp is not None else "invoke",
                    "start": x.start, "end": x.end, "order": order.get(i), "failed": i == fail})
    return out


def _witness(model: Model, key: Any, keyed: bool, calls: list[Call], res) -> dict:
    c = calls[res.fail_op]
    comp = c.completion
    return {
        "op": {"index": comp.index, "invoke_index": c.invoke.index, "process": c.process,
               "type": comp.type, "f": c.f, "value": resolved_value(c.invoke, comp),
               "line": comp.line},
        "key": thaw(key) if keyed else None,
        "prefix": [calls[i].invoke.index for i in res.prefix],
        "states": [model.describe(s) for s in res.states],
        "model": model.name,
        "timeline": _timeline(calls, res.fail_op, res.prefix),
    }


def check_linearizable(ops: Iterable[Op], model: str | Model, initial: Any = None,
                       time_limit: float | None = None, partition: bool = True) -> dict:
    """Decide linearizability of `ops` against `model` starting from `initial`;
    `partition=False` searches the whole history as one (same verdict, more work)."""
    t0 = time.monotonic()
    deadline = t0 + time_limit if time_limit is not None else None
    m = get_model(model)
    counted = _Counted(ops)
    calls = pair_calls(counted)
    try:
        groups = m.partition(calls) if partition else None
    except ValueError as e:
        raise HistoryError(str(e)) from None
    keyed = groups is not None
    if groups is None:
        groups = {None: calls}
    try:
        m.init(initial)
    except ValueError as e:
        raise ValueError(f"bad initial value for {m.name}: {e}") from None

    stats = {"model": m.name, "ops": counted.n, "calls": len(calls), "constraining": 0,
             "partitions": len(groups), "explored": 0, "configurations": 0,
             "time_limit_s": time_limit}
    prepared_groups = []
    for key, group in groups.items():
        prepared, kept = _prepare(m, group)
        stats["constraining"] += len(kept)
        prepared_groups.append((len(kept), key, prepared, kept))
    prepared_groups.sort(key=lambda g: g[0])

    verdict: Any = True
    anomalies: dict = {}
    undecided = []
    for _, key, prepared, kept in prepared_groups:
        init_state = m.init(m.restrict(initial, key) if keyed else initial)
        res = search(m, init_state, prepared, [c.start for c in kept], [c.end for c in kept],
                     deadline=deadline)
        stats["explored"] += res.explored
        stats["configurations"] += res.cache_size
        if res.valid is False:
            verdict = False
            anomalies["nonlinearizable"] = _witness(m, key, keyed, kept, res)
            break
        if res.valid is None:
            undecided.append(thaw(key) if keyed else None)
    if verdict is True and undecided:
        verdict = "unknown"
        stats["reason"] = f"time limit of {time_limit} s reached"
        stats["undecided_partitions"] = len(undecided)
    if verdict is True and counted.n == 0:
        verdict = "unknown"
        stats["reason"] = "nothing to check: the history has no ops"
    stats["elapsed_s"] = round(time.monotonic() - t0, 6)
    return {"valid": verdict, "anomalies": anomalies, "stats": stats}


class LinearizabilityChecker:
    """The lab's checker interface: `LinearizabilityChecker(model, initial, time_limit).check(ops)`."""

    name = "linearizable"

    def __init__(self, model: str | Model = "register", initial: Any = None,
                 time_limit: float | None = None):
        self.model = get_model(model)
        self.initial = initial
        self.time_limit = time_limit

    def check(self, ops: Iterable[Op]) -> dict:
        return check_linearizable(ops, self.model, self.initial, self.time_limit)
