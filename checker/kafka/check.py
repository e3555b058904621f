"""`check_kafka`: every Kafka analysis over one history, and the verdict.

Guarantees: reads the history once (twice more at most, and only when there
are anomalies: once to confirm zombie-write candidates, once to fetch the ops
the witnesses name), never holds it in memory, and returns

    {"valid": True | False | "unknown",
     "anomalies": {type: [witness, ...]},   # the ones that make it invalid
     "allowed":   {type: [witness, ...]},   # found, but Kafka's model permits them
     "stats": {...},
     "realtime_lag": {"max_ms", "p99_ms", "per_key", "worst", "series", ...}}

(`realtime_lag`: Jepsen's realtime lag, see checker.kafka.lag; max_ms is None
when no ok poll was timed.) A history with nothing to analyse (Jepsen's
transaction graph would have no edge) is not valid: `empty-transaction-graph`,
reported only when nothing else was found (Jepsen lists it beside the rest).

`valid` is False iff `anomalies` is non-empty; "unknown" when the time limit
ran out first (then nothing is claimed). At most `cap` witnesses per type are
listed; `stats.anomaly_counts` / `stats.allowed_counts` count them all.
The anomaly rules are in the modules: checker.kafka.offsets, .order,
.visibility, .cycles, .producers, .hangs (a `hanging-transaction`: an LSO
that stood below the high watermark for `hang_threshold_s` or longer, in
the offsets a run sampled; `stats.lso_behind_at_end` lists every partition
whose read_committed consumers were held back at the end, however briefly).
"""
from __future__ import annotations

import os
import time
from typing import Any, Iterable

from checker.history import HistoryError, Op
from checker.kafka.codes import CODE_BITS, CODE_MASK, FAIL
from checker.kafka.cycles import cycle_findings
from checker.kafka.hangs import DEFAULT_THRESHOLD_S, HANGING, hanging_transactions, stalls_at_end
from checker.kafka.mops import json_key, norm_key, norm_value
from checker.kafka.offsets import VersionOrder, duplicates, inconsistent_offsets
from checker.kafka.order import order_findings
from checker.kafka.producers import zombie_scanner
from checker.kafka.source import HistorySource
from checker.kafka.state import Collector, ShapeError
from checker.kafka.visibility import (g1a, lost_writes, precommitted_reads, unseen,
                                      unseen_findings)
from checker.kafka.witness import Finding, materialize

EMPTY_GRAPH = "empty-transaction-graph"

MAX_WITNESSES = 32
TYPES_ORDER = (EMPTY_GRAPH, "inconsistent-offsets", "duplicate", "lost-write", HANGING, "G1a", "precommitted-read",
               "zombie-write", "producer-order", "pid-reuse", "G1c", "G0", "poll-skip",
               "nonmonotonic-poll", "nonmonotonic-send", "int-poll-skip",
               "int-nonmonotonic-poll", "int-send-skip", "int-nonmonotonic-send", "unseen")


def as_source(history: Any, fmt: str = "auto") -> HistorySource:
    if isinstance(history, HistorySource):
        return history
    if isinstance(history, (str, os.PathLike)):
        return HistorySource(path=history, fmt=fmt)
    return HistorySource(ops=history)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {json_key(k) if isinstance(k, tuple) else k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return [_jsonable(v) for v in sorted(x, key=repr)]
    return x


def _stats(c: Collector, unseen_summary: dict) -> dict:
    by_type: dict[str, int] = {}
    by_f: dict[str, dict] = {}
    for (f, t), n in sorted(c.counts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        by_type[t] = by_type.get(t, 0) + n
        by_f.setdefault(str(f), {})[t] = n
    keys = c.keys
    span = None
    if c.t_first is not None and c.t_last is not None:
        span = round((c.t_last - c.t_first) / 1e9, 6)
    return {
        "ops": c.n_ops,
        "by_type": {t: by_type.get(t, 0) for t in ("invoke", "ok", "fail", "info")},
        "by_f": by_f,
        "records": {
            "sent": c.sent,
            "acked": sum(ks.acked for ks in keys.values()),
            "failed": sum(len(ks.failed) for ks in keys.values()),
            "indefinite": sum(len(w) for w in c.info_writes.values()),
            "read": sum(len(ks.read_ok) for ks in keys.values()),
            "read_records": c.read_records,
            "unseen": unseen_summary["count"],
        },
        "keys": len(keys),
        "unseen": {"count": unseen_summary["count"],
                   "by_key": {json_key(k): n for k, n in unseen_summary["by_key"].items()},
                   "values": {json_key(k): v for k, v in unseen_summary["values"].items()}},
        "errors": dict(sorted(c.errors.items(), key=lambda kv: -kv[1])),
        "time_span_s": span,
    }


def empty_graph(c: Collector) -> list[Finding]:
    """Jepsen's verdict on a history with nothing to analyse: its transaction graph (Elle's,
    over send/poll/txn ops: a realtime edge from an ok op to an ok or info one invoked after
    it completed, a wr edge from a send to a poll that read it) has no edge, and Jepsen's
    Kafka checker reports :empty-transaction-graph, which no test allows. The lab's own
    producer-id analysis (pid-reuse, over init-producer ops: the pid workload) is something to
    check too: a history with ok init-producer ops is judged by it, not called empty."""
    if c.realtime_edge:
        return []
    if any(t == "ok" and f == "init-producer" for (f, t) in c.counts):
        return []
    for ks in c.keys.values():
        writer = ks.writer
        for v, r in ks.read_ok.items():
            w = writer.get(v)
            if w is not None and (w & CODE_MASK) != FAIL and (w >> CODE_BITS) != r:
                return []
    ok = sum(n for (f, t), n in c.counts.items() if t == "ok" and f in ("send", "poll", "txn"))
    return [Finding(EMPTY_GRAPH, {
        "reason": (f"nothing to check: {c.n_ops} ops, {ok} ok send/poll/txn; no ok op precedes "
                   f"another in real time and no poll read another op's send"),
        "ops": c.n_ops, "ok_kafka_ops": ok})]


def _group(findings: list[Finding], cap: int) -> tuple[dict, dict, dict, dict, list]:
    bad: dict[str, list] = {}
    ok: dict[str, list] = {}
    nbad: dict[str, int] = {}
    nok: dict[str, int] = {}
    kept: list[Finding] = []
    for fd in findings:
        table, counts = (ok, nok) if fd.allowed else (bad, nbad)
        counts[fd.type] = counts.get(fd.type, 0) + 1
        lst = table.setdefault(fd.type, [])
        if len(lst) < cap:
            lst.append(fd)
            kept.append(fd)
    return bad, ok, nbad, nok, kept


def _ordered(table: dict) -> dict:
    rank = {t: i for i, t in enumerate(TYPES_ORDER)}
    return {t: [fd.to_json() for fd in table[t]]
            for t in sorted(table, key=lambda t: (rank.get(t, len(rank)), t))}


def check_kafka(history: str | os.PathLike | HistorySource | Iterable[Op | dict], fmt: str = "auto", *,
                time_limit: float | None = None, series: Any = None, strict_unseen: bool = False,
                cap: int = MAX_WITNESSES, hang_threshold_s: float | None = None) -> dict:
    """Run the Kafka analyses; see the module docstring for the result."""
    t0 = time.monotonic()
    deadline = t0 + time_limit if time_limit is not None else None
    src = as_source(history, fmt)
    c = Collector(deadline, series)
    try:
        c.run(src.dicts())
    except ShapeError as e:
        raise HistoryError(f"{src.where(e.index)}: {e}") from None
    if series is not None and hasattr(series, "set_unseen"):
        series.set_unseen(*c.unseen_series)
    unseen_summary = unseen(c.keys)
    stats = _stats(c, unseen_summary)
    if c.timed_out:
        stats["reason"] = f"time limit of {time_limit} s reached after {c.n_ops} ops"
        stats["elapsed_s"] = round(time.monotonic() - t0, 6)
        return _jsonable({"valid": "unknown", "anomalies": {}, "allowed": {}, "stats": stats,
                          "realtime_lag": c.lag.summary(c.t_first)})

    c.finish()
    keys = c.keys
    vo = VersionOrder(keys)
    findings: list[Finding] = []
    findings += inconsistent_offsets(keys)
    findings += duplicates(keys)
    findings += lost_writes(keys, c.info_writes)
    findings += g1a(keys)
    findings += precommitted_reads(c.precommitted)
    findings += order_findings(c, vo)
    findings += c.producers.producer_order(keys)
    findings += c.producers.pid_reuse()
    cyc, complete = cycle_findings(c, deadline)
    findings += cyc
    if strict_unseen:
        findings += unseen_findings(keys, unseen_summary)
    if c.offsets:
        threshold = DEFAULT_THRESHOLD_S if hang_threshold_s is None else hang_threshold_s
        findings += hanging_transactions(c.offsets, keys, threshold, c.t_first)
        stats["offset_samples"] = sum(len(v) for v in c.offsets.by_key.values())
        stats["hang_threshold_s"] = threshold
        stalls = stalls_at_end(c.offsets)
        if stalls:
            stats["lso_behind_at_end"] = stalls

    zombies = c.producers.zombie_candidates(keys)
    if zombies:
        confirmed: list[Finding] = []
        materialize([], src.dicts, [zombie_scanner(zombies, confirmed, norm_key, norm_value)])
        findings += confirmed
    if not findings:
        findings += empty_graph(c)      # only when nothing else was found (Jepsen lists both)

    bad, allowed, nbad, nok, kept = _group(findings, cap)
    materialize(kept, src.dicts)
    stats["anomaly_counts"] = nbad
    stats["allowed_counts"] = nok
    if not complete:
        stats["cycle_search"] = f"cut short by the time limit of {time_limit} s"
    stats["elapsed_s"] = round(time.monotonic() - t0, 6)
    valid: Any = True
    if bad:
        valid = False
    elif not complete:
        valid = "unknown"
    return _jsonable({"valid": valid, "anomalies": _ordered(bad), "allowed": _ordered(allowed),
                      "stats": stats, "realtime_lag": c.lag.summary(c.t_first)})
