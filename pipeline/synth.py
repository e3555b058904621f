"""Synthetic chaos runs in the history contract's shape, with anomalies injected on purpose.

Guarantees: `write_run(dir, ...)` writes DIR/history.jsonl and DIR/run.json
the way `eoslab run` lays them out (workload, nemesis list, seed, settings;
plus `"synthetic": true`, the injections made and any lab errors given),
and returns a manifest.
The history is a function of its arguments: producers send one record per op
(`producer` and `seq` fields as the queue workload writes them), consumers
poll every key from their own positions, nemesis start/stop pairs mark
faults, final polls catch every consumer up; empty polls (and one nemesis
op when needed) pad the history to exactly n_ops when it came out shorter. Latencies are drawn from
`latency_ns` (a fixed value when low == high). Without injections the
history is valid and has no unseen record. Each injection adds exactly the
findings listed in EXPECTED (what `check_kafka` reports for it):

  duplicate   an acknowledged record appended twice          duplicate
  lost        an acknowledged record truncated; the next      lost-write,
              append takes its offset                         inconsistent-offsets
  g1a         a failed send whose record was appended         G1a
  rewind      a consumer moves back on one key               nonmonotonic-poll
  unseen      an acknowledged record after the final polls   (stats: unseen + 1)

The test suite and bench/analyze.py build their stores with it.
"""
from __future__ import annotations

import heapq
import json
import os
import random
from typing import Any

try:
    import orjson as _orjson

    def _dumps(d: dict) -> bytes:
        return _orjson.dumps(d) + b"\n"
except ImportError:  # pragma: no cover - depends on the environment
    def _dumps(d: dict) -> bytes:
        return (json.dumps(d, separators=(",", ":")) + "\n").encode()

INJECTIONS = ("duplicate", "lost", "g1a", "rewind", "unseen")
EXPECTED = {"duplicate": {"duplicate": 1}, "lost": {"lost-write": 1, "inconsistent-offsets": 1},
            "g1a": {"G1a": 1}, "rewind": {"nonmonotonic-poll": 1}, "unseen": {}}
UNSEEN_PER = {"unseen": 1, "lost": 1}      # acknowledged records no poll returns, per injection


class _Gen:
    def __init__(self, path: str, seed: int, keys: int, producers: int, consumers: int,
                 latency_ns: tuple[int, int], gap_ns: tuple[int, int], nemesis: list[str]):
        self.rng = random.Random(seed)
        self.fh = open(path, "wb")
        self.buf: list[bytes] = []
        self.idx = 0
        self.t = 0
        self.keys, self.producers, self.consumers = keys, producers, consumers
        self.lat, self.gap = latency_ns, gap_ns
        self.logs: list[list[int]] = [[] for _ in range(keys)]
        self.pos = [[0] * keys for _ in range(consumers)]
        self.seqs: dict[tuple, int] = {}
        self.truncated: dict[int, int] = {}      # key -> producer whose record there was lost
        self.open: dict[int, tuple] = {}         # producer -> (key, value) of its open send
        self.next_value = 1
        self.faults = [n for n in nemesis if n != "none"]
        self.fault_open: str | None = None

    def emit(self, d: dict, t: int) -> None:
        self.t = max(self.t, t)
        d["index"], d["time"] = self.idx, self.t
        self.idx += 1
        self.buf.append(_dumps(d))
        if len(self.buf) >= 4096:
            self.flush()

    def flush(self) -> None:
        self.fh.write(b"".join(self.buf))
        self.buf.clear()

    def producer(self, p: int) -> dict:
        return {"pid": 1000 + p, "epoch": 0, "session": f"p{p}-1", "transactional_id": None}

    def send_invoke(self, p: int, t: int) -> None:
        k, v = self.rng.randrange(self.keys), self.next_value
        if self.truncated.get(k) == p:       # another writer fills the hole first
            k = (k + 1 + self.rng.randrange(self.keys - 1)) % self.keys
        self.next_value += 1
        self.open[p] = (k, v)
        self.emit({"process": p, "type": "invoke", "f": "send", "value": [["send", k, v]]}, t)

    def send_complete(self, p: int, t: int, inject: str | None) -> None:
        k, v = self.open.pop(p)
        prod = self.producer(p)
        log = self.logs[k]
        if inject == "g1a":
            log.append(v)
            self.emit({"process": p, "type": "fail", "f": "send", "value": [["send", k, v]],
                       "error": "NOT_ENOUGH_REPLICAS", "producer": prod}, t)
            return
        s = self.seqs.get((p, k), 0)
        self.seqs[(p, k)] = s + 1
        off = len(log)
        self.truncated.pop(k, None)
        if inject == "lost":                 # acknowledged, then truncated away
            self.truncated[k] = p
        else:
            log.append(v)
        if inject == "duplicate":
            log.append(v)
        self.emit({"process": p, "type": "ok", "f": "send", "value": [["send", k, [off, v]]],
                   "producer": prod, "seq": [s]}, t)

    def poll_invoke(self, p: int, t: int) -> None:
        self.emit({"process": p, "type": "invoke", "f": "poll", "value": [["poll"]]}, t)

    def poll_complete(self, p: int, t: int, inject: str | None, final: bool = False) -> bool:
        pos = self.pos[p - self.producers]
        back = None
        if inject == "rewind":             # back by up to 2 on its furthest key, then re-read
            back = max(range(self.keys), key=lambda k: pos[k])
            pos[back] = max(0, pos[back] - 2)
        got: dict[str, list] = {}
        for k in range(self.keys):
            log = self.logs[k]
            hi = len(log) if final else min(len(log), pos[k] + self.rng.randint(0, 6))
            if k == back:
                hi = max(hi, pos[k] + 1)
            if hi > pos[k]:
                got[str(k)] = [[o, log[o]] for o in range(pos[k], hi)]
                pos[k] = hi
        self.emit({"process": p, "type": "ok", "f": "poll", "value": [["poll", got]],
                   "isolation": "read_committed"}, t)
        return bool(got)

    def nemesis(self, t: int) -> None:
        if self.fault_open is None:
            self.fault_open = self.rng.choice(self.faults)
            f = f"start-{self.fault_open}"
        else:
            f = f"stop-{self.fault_open}"
            self.fault_open = None
        self.emit({"process": "nemesis", "type": "info", "f": f, "value": None}, t)
        self.emit({"process": "nemesis", "type": "info", "f": f, "value": "synthetic"}, t)


def generate(path: str, *, n_ops: int, seed: int, inject: dict[str, int] | None = None,
             nemesis: list[str] = (), keys: int = 3, producers: int = 4, consumers: int = 2,
             latency_ns: tuple[int, int] = (200_000, 20_000_000),
             gap_ns: tuple[int, int] = (100_000, 5_000_000)) -> dict:
    """Write about n_ops ops to path; returns {"ops", "records", "injected"}."""
    inject = {k: n for k, n in (inject or {}).items() if n}
    unknown = set(inject) - set(INJECTIONS)
    if unknown:
        raise ValueError(f"unknown injection(s) {sorted(unknown)}; known: {', '.join(INJECTIONS)}")
    g = _Gen(path, seed, keys, producers, consumers, latency_ns, gap_ns, list(nemesis))
    rng = g.rng
    body = max(n_ops - 2 * consumers * 2 - 2 * inject.get("unseen", 0) - 8, 10)
    # where the injections go: distinct op counts in the middle of the run
    slots = rng.sample(range(body // 10, max(body * 9 // 10, body // 10 + 1)),
                       sum(n for k, n in inject.items() if k != "unseen"))
    at: dict[int, str] = {}
    i = 0
    for kind in INJECTIONS:
        if kind == "unseen":
            continue
        for _ in range(inject.get(kind, 0)):
            at[slots[i]] = kind
            i += 1
    # events: (time, process, phase); each process invokes, completes after a latency, rests, again
    events = [(rng.randint(*g.gap), p, 0) for p in range(producers + consumers)]
    heapq.heapify(events)
    pending: list[tuple[int, str]] = sorted(at.items())
    nemesis_every = max(body // 6, 50)
    nemesis_at = nemesis_every
    while events:
        t, p, phase = heapq.heappop(events)
        if phase == 0:
            if g.idx >= body:              # winding down: open ops complete, nothing new starts
                continue
            if g.faults and g.idx >= nemesis_at:
                g.nemesis(t)
                nemesis_at += nemesis_every
            (g.send_invoke if p < producers else g.poll_invoke)(p, t)
            heapq.heappush(events, (t + rng.randint(*g.lat), p, 1))
            continue
        kind = None
        if pending and g.idx >= pending[0][0]:
            want = pending[0][1]
            ready = ((want == "rewind") == (p >= producers)
                     and (want != "rewind" or any(g.pos[p - producers]))
                     and (want != "lost" or not g.truncated))     # one hole at a time
            if ready:
                kind = pending.pop(0)[1]
        if p < producers:
            g.send_complete(p, t, kind)
        else:
            g.poll_complete(p, t, kind)
        heapq.heappush(events, (t + rng.randint(*g.gap), p, 0))
    if pending:
        raise ValueError(f"history too short for its injections ({len(pending)} left); give more ops")
    if g.fault_open:
        g.nemesis(g.t + 1)
    for c in range(consumers):             # final polls: every consumer reads to the end
        while True:
            g.poll_invoke(producers + c, g.t + 1)
            if not g.poll_complete(producers + c, g.t + rng.randint(*g.lat), None, final=True):
                break
    target = n_ops - 2 * inject.get("unseen", 0)       # exactly n_ops when there is room: empty polls
    while g.idx + 2 <= target:
        g.emit({"process": producers, "type": "invoke", "f": "poll", "value": [["poll"]]}, g.t + 1)
        g.emit({"process": producers, "type": "ok", "f": "poll", "value": [["poll", {}]],
                "isolation": "read_committed"}, g.t + rng.randint(*g.lat))
    if g.idx < target:
        g.emit({"process": "nemesis", "type": "info", "f": "heal", "value": None}, g.t + 1)
    for _ in range(inject.get("unseen", 0)):
        g.send_invoke(0, g.t + 1)
        g.send_complete(0, g.t + rng.randint(*g.lat), "unseen")
    g.flush()
    g.fh.close()
    return {"ops": g.idx, "records": g.next_value - 1, "injected": dict(inject)}


def write_run(out: str, *, n_ops: int, seed: int, settings: dict[str, Any] | None = None,
              nemesis: list[str] = ("none",), workload: str = "queue",
              inject: dict[str, int] | None = None, lab_errors: list[dict] | None = None, **kw) -> dict:
    """A run directory as `eoslab run` lays it out (no results.json / report.html); `lab_errors`
    go in run.json as a run the lab broke lists them."""
    os.makedirs(out, exist_ok=True)
    info = generate(os.path.join(out, "history.jsonl"), n_ops=n_ops, seed=seed, inject=inject,
                    nemesis=list(nemesis), **kw)
    meta = {"workload": workload, "nemesis": list(nemesis), "seed": seed,
            "settings": {k: str(v) for k, v in (settings or {}).items()},
            "schedule": [], "synthetic": True, "injected": info["injected"], "ops": info["ops"]}
    if lab_errors:
        meta["lab_errors"] = list(lab_errors)
    with open(os.path.join(out, "run.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    return info


def expected_findings(injected: dict[str, int]) -> tuple[dict[str, int], int]:
    """(anomaly type -> count, unseen records) that check_kafka reports for these injections."""
    counts: dict[str, int] = {}
    unseen = 0
    for kind, n in injected.items():
        for t, c in EXPECTED[kind].items():
            counts[t] = counts.get(t, 0) + c * n
        unseen += UNSEEN_PER.get(kind, 0) * n
    return counts, unseen
