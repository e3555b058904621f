"""`eoslab shrink RUN_DIR`: Jepsen-style delta debugging of an anomalous run's fault schedule and size.

Guarantees: from a run whose results.json says "invalid", `shrink` first
replays the original schedule, and stops there, saying so, when it does not
reproduce; then it looks for a smaller run that still shows one of the
run's anomaly types (or of the `anomalies` asked for, each of which the run
must show): ddmin (Zeller's delta debugging) over the events of run.json's
"schedule", each kept event with its own "at" and "duration", then one try
with a shorter time limit (the last kept fault's end plus MARGIN_S), then
the run's size: each dimension cluster.shrink_dimensions finds in it
(processes, records) halved toward its floor while it reproduces. Every
candidate is replayed as `eoslab run --schedule` (a fresh interpreter, the
same code path a user runs) with the run's own workload, settings, seed,
client, concurrency and Kafka version (a size step: with its smaller
values), in OUT/candidates/NNN/try-K (its schedule in
OUT/candidates/NNN/schedule.json, the run's output in try-K.log); a
candidate reproduces when at least `need` of `tries` runs show the anomaly
class (runs stop once `need` did, or once `need` can no longer be reached).
Timing is not deterministic, so a candidate that did not reproduce may
still, and a lab-error run never counts as a reproduction. The budget
(runs, minutes) is checked before each run; a run in progress is finished,
never cut. The result: OUT/minimal (a copy of the smallest reproducing
run's folder, or of RUN_DIR when nothing smaller reproduced),
OUT/schedule.json (its schedule), OUT/shrink.json (original and minimal
schedule, time limit and size, the reproduction rate, runs used, the replay
command, which carries the minimal size) and a one-paragraph summary on
stdout (cluster.shrink_summary); progress lines on stderr. Bad input (not
a run folder, a valid, unknown or lab-error run, a run without faults, an
anomaly type the run does not show, bad flags) is one line and exit 2
before anything runs.

The search itself (`ddmin`, `k_of_n`, `Budget`, and shrink_dimensions.search) is pure: it takes a
predicate, so it is tested without a cluster (tests/unit/test_shrink.py).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cluster import shrink_dimensions as dims_
from cluster.shrink_summary import describe, summary

MARGIN_S = 3.0                 # the shorter time limit: the last kept fault's end plus this
DEFAULT_TRIES, DEFAULT_NEED, DEFAULT_BUDGET_RUNS = 3, 1, 30


class BadInput(ValueError):
    """A run folder or flags shrink cannot work from: one line, exit 2."""


# ---- the search: pure, a predicate in, the smallest reproducing subset out ---------------------------

@dataclass
class Budget:
    """Runs and wall-clock minutes the search may spend; checked before each run."""
    runs: int = DEFAULT_BUDGET_RUNS
    minutes: float | None = None
    used: int = 0
    cut: bool = False          # the search wanted a run the budget no longer had
    t0: float = field(default_factory=time.monotonic)
    clock: Callable[[], float] = time.monotonic

    def exhausted(self) -> bool:
        if self.used >= self.runs:
            return True
        return self.minutes is not None and (self.clock() - self.t0) / 60 >= self.minutes

    def spend(self) -> bool:
        """Take one run from the budget: False (nothing taken) when it is spent."""
        if self.exhausted():
            self.cut = True
            return False
        self.used += 1
        return True


@dataclass
class Verdict:
    reproduced: bool
    hits: int                  # runs that showed the anomaly class
    tries: int                 # runs made
    complete: bool = True      # False: the budget ran out before the k-of-n rule could decide


def k_of_n(try_once: Callable[[], bool], tries: int, need: int, budget: Budget) -> Verdict:
    """Up to `tries` runs of `try_once`; reproduced when `need` of them returned True. Stops as soon as
    `need` hits are in, or can no longer be reached, or the budget is spent (then not reproduced)."""
    hits = made = 0
    while made < tries and hits < need and hits + (tries - made) >= need:
        if not budget.spend():
            return Verdict(False, hits, made, complete=False)
        made += 1
        if try_once():
            hits += 1
    return Verdict(hits >= need, hits, made)


def _split(items: list, n: int) -> list[list]:
    out, start = [], 0
    for i in range(n):
        end = start + (len(items) - start) // (n - i)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


def ddmin(items: Sequence, test: Callable[[list], bool], budget: Budget | None = None) -> list:
    """Zeller's ddmin: a 1-minimal subset of `items` (kept in order) for which `test` holds, assuming it
    holds for `items`; each subset is tested at most once. With a budget, the smallest subset found
    when it runs out. The empty subset is never tested."""
    cur, n = list(items), 2
    seen: dict[tuple, bool] = {}

    def t(sub: list) -> bool:
        key = tuple(id(x) for x in sub)
        if key not in seen:
            seen[key] = bool(test(sub))
        return seen[key]

    while len(cur) >= 2:
        if budget is not None and budget.exhausted():
            budget.cut = True
            break
        chunks = _split(cur, min(n, len(cur)))
        nxt = None
        for c in chunks:                                   # a subset alone
            if t(c):
                nxt, n = c, 2
                break
        if nxt is None and len(chunks) > 2:                # a subset's complement
            for i in range(len(chunks)):
                comp = [x for j, c in enumerate(chunks) if j != i for x in c]
                if t(comp):
                    nxt, n = comp, max(len(chunks) - 1, 2)
                    break
        if nxt is not None:
            cur = nxt
            continue
        if len(chunks) >= len(cur):                        # single events, none reproduces alone: 1-minimal
            break
        n = min(len(cur), 2 * len(chunks))
    return cur


# ---- the run folder --------------------------------------------------------------------------------

def load_run(run_dir: str) -> tuple[dict, dict]:
    """run.json and results.json of an anomalous run with a fault schedule, else BadInput."""
    if not os.path.isdir(run_dir):
        raise BadInput(f"{run_dir}: no such folder")
    docs = []
    for name in ("run.json", "results.json"):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            raise BadInput(f"{run_dir} has no {name}: not the folder of a judged `eoslab run`")
        try:
            with open(path) as f:
                docs.append(json.load(f))
        except ValueError as e:
            raise BadInput(f"{path}: not JSON ({e})") from None
    meta, results = docs
    verdict = results.get("verdict")
    if verdict == "lab-error" or results.get("lab_errors"):
        raise BadInput(f"{run_dir} is a lab-error run: its verdict is not about Kafka, nothing to shrink")
    if verdict != "invalid" or not results.get("anomalies"):
        raise BadInput(f"{run_dir} has verdict {verdict!r}, not 'invalid': no anomaly to shrink towards")
    if not isinstance(meta.get("schedule"), list) or not meta["schedule"]:
        raise BadInput(f"{run_dir} has no fault schedule (run.json \"schedule\" is empty): nothing to shrink")
    for k in ("workload", "seed", "time_limit"):
        if k not in meta:
            raise BadInput(f"{run_dir}/run.json has no {k!r}: not written by `eoslab run`")
    if meta.get("runtime") == "k8s":
        raise BadInput(f"{run_dir} ran on k8s: shrink replays on the local or docker runtime only")
    return meta, results


def run_command(meta: dict, schedule_file: str, time_limit: float, out: str, cluster: str | None = None,
                program: Sequence[str] = ("eoslab",)) -> list[str]:
    """The `eoslab run --schedule` that replays the run with these faults."""
    cmd = [*program, "run", "--workload", meta["workload"], "--seed", str(meta["seed"]),
           "--time-limit", f"{time_limit:g}", "--schedule", schedule_file]
    # no --nemesis: it defaults to the schedule's packages (the ones the candidate plays)
    for k, v in (meta.get("settings") or {}).items():
        cmd += ["--set", f"{k}={v}"]
    for flag, key in (("--concurrency", "concurrency"), ("--partitions", "partitions"),
                      ("--kafka-version", "kafka_version"),
                      ("--client", "client"), ("--runtime", "runtime")):
        if meta.get(key) is not None:
            cmd += [flag, str(meta[key])]
    if cluster:
        cmd += ["--cluster", cluster]
    return cmd + ["--out", out]


def short_limit(events: list[dict], time_limit: float) -> float:
    """Just past the last kept fault's end, never beyond the run's own time limit."""
    end = max(e["at"] + e["duration"] for e in events)
    return min(time_limit, round(end + MARGIN_S, 1))


# ---- the shrinker ------------------------------------------------------------------------------------

@dataclass
class Options:
    out: str
    tries: int = DEFAULT_TRIES
    need: int = DEFAULT_NEED
    budget_runs: int = DEFAULT_BUDGET_RUNS
    budget_minutes: float | None = None
    cluster: str | None = None
    anomalies: Sequence[str] = ()         # the types that count (default: every type the run shows)
    run_timeout_s: float = 900.0          # beyond the time limit: a replay that hangs is stopped (SIGINT)

    def check(self) -> None:
        if self.tries < 1 or not 1 <= self.need <= self.tries:
            raise BadInput(f"--need {self.need} of --tries {self.tries}: need 1 <= K <= N")
        if self.budget_runs < 1:
            raise BadInput("--budget-runs must be at least 1")
        if self.budget_minutes is not None and self.budget_minutes <= 0:
            raise BadInput("--budget-minutes must be positive")
        if os.path.exists(self.out) and (not os.path.isdir(self.out) or os.listdir(self.out)):
            raise BadInput(f"--out {self.out} exists and is not empty: pick another folder")


class Shrinker:
    """Replays candidates of one run (see the module docstring)."""

    def __init__(self, run_dir: str, opts: Options, log=sys.stderr):
        self.run_dir, self.opts, self.log = run_dir, opts, log
        opts.check()
        self.meta, self.results = load_run(run_dir)
        self.types = sorted(self.results["anomalies"])
        if missing := sorted(set(opts.anomalies) - set(self.types)):
            raise BadInput(f"{run_dir} shows no {', '.join(missing)} (it shows {', '.join(self.types)})")
        self.types = sorted(opts.anomalies or self.types)
        self.events = [{"at": float(e["at"]), "package": e["package"], "duration": float(e["duration"])}
                       for e in self.meta["schedule"]]
        self.time_limit = float(self.meta["time_limit"])
        self.dims = dims_.of_run(self.meta)       # the size dimensions this run has
        self.budget = Budget(runs=opts.budget_runs, minutes=opts.budget_minutes)
        self.candidates: list[dict] = []          # each: n, schedule, time_limit, hits, tries, reproduced
        self.best: dict | None = None             # the smallest reproducing candidate, with its try folder
        self.confirmed: bool | None = None        # whether the original schedule reproduced when replayed

    def say(self, msg: str) -> None:
        used = f"runs {self.budget.used}/{self.budget.runs}, {(time.monotonic() - self.budget.t0) / 60:.1f} min"
        print(f"shrink: {msg} [{used}]", file=self.log, flush=True)

    def _once(self, cand_dir: str, sched_file: str, time_limit: float, k: int, seen: list, meta: dict) -> bool:
        out = os.path.join(cand_dir, f"try-{k}")
        cmd = run_command(meta, sched_file, time_limit, out, self.opts.cluster,
                          program=(sys.executable, "-m", "eoslab"))
        with open(os.path.join(cand_dir, f"try-{k}.log"), "w") as logf:
            p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
            try:
                p.wait(timeout=time_limit + self.opts.run_timeout_s)
            except subprocess.TimeoutExpired:          # let the run heal and tear its cluster down
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(timeout=180)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            except BaseException:
                p.send_signal(signal.SIGINT)
                p.wait(timeout=180)
                raise
        try:
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = {}
        found = sorted(set(res.get("anomalies") or {}) & set(self.types)) \
            if res.get("verdict") == "invalid" else []
        what = ", ".join(found) if found else (res.get("verdict") or f"no verdict (exit {p.returncode})")
        self.say(f"  try {k}: {what}{' (reproduced)' if found else ''}  {out}")
        if found:
            seen.append(out)
        return bool(found)

    def test(self, events: list[dict], time_limit: float, size: dict | None = None) -> bool:
        """One candidate: k of n replays; `size` the dimensions' values (default: the run's own). With the
        budget spent, no candidate: not reproduced, and the search marked cut."""
        if self.budget.exhausted():
            self.budget.cut = True
            return False
        n, size = len(self.candidates) + 1, dict(size or dims_.originals(self.dims))
        meta = dims_.apply(self.meta, size)
        cand_dir = os.path.join(self.opts.out, "candidates", f"{n:03d}")
        os.makedirs(cand_dir, exist_ok=True)
        sched = [dict(e) for e in events]
        sched_file = os.path.join(cand_dir, "schedule.json")
        with open(sched_file, "w") as f:
            json.dump(sched, f, indent=1)
        self.say(f"candidate {n:03d}: {len(sched)} of {len(self.events)} faults ({describe(sched)}), "
                 f"time limit {time_limit:g} s" + "".join(f", {k} {v:g}" for k, v in size.items()))
        hits: list[str] = []                 # the try folders that reproduced
        made = [0]

        def once() -> bool:
            made[0] += 1
            return self._once(cand_dir, sched_file, time_limit, made[0], hits, meta)
        v = k_of_n(once, self.opts.tries, self.opts.need, self.budget)
        rec = {"candidate": n, "schedule": sched, "time_limit": time_limit, "size": size, "hits": v.hits,
               "tries": v.tries, "reproduced": v.reproduced, "complete": v.complete, "folder": cand_dir}
        self.candidates.append(rec)
        self.say(f"candidate {n:03d}: " + (f"reproduced in {v.hits} of {v.tries}" if v.reproduced else
                 f"did not reproduce ({v.hits} of {v.tries}{'' if v.complete else ', budget spent'})"))
        key = (len(sched), time_limit, *size.values())
        if v.reproduced and (self.best is None or key <= self.best["key"]):
            self.best = dict(rec, run=hits[0], key=key)
        return v.reproduced

    def shrink(self) -> dict:
        opts = self.opts
        os.makedirs(opts.out, exist_ok=True)
        t0 = time.time()
        self.say(f"{self.run_dir}: {', '.join(self.types)} with {len(self.events)} faults "
                 f"({describe(self.events)}), time limit {self.time_limit:g} s; reproduces = {opts.need} of "
                 f"{opts.tries} tries; budget {opts.budget_runs} runs"
                 + (f", {opts.budget_minutes:g} min" if opts.budget_minutes else ""))
        self.say("first, the original schedule as it was recorded")
        self.confirmed = self.test(self.events, self.time_limit)
        if not self.confirmed:              # nothing to shrink: the anomaly needs timing a replay did not give
            return self.finish(t0)
        order = {id(e): i for i, e in enumerate(self.events)}
        kept = ddmin(self.events, lambda sub: self.test(sub, self.time_limit), self.budget)
        kept = sorted(kept, key=lambda e: order[id(e)])
        short, limit = short_limit(kept, self.time_limit), self.time_limit
        if short < self.time_limit - 0.5 and self.test(kept, short):
            limit = short
        dims_.search(self.dims, lambda size: self.test(kept, limit, size), self.budget)
        return self.finish(t0)

    def finish(self, t0: float) -> dict:
        opts = self.opts
        minimal = os.path.join(opts.out, "minimal")
        best = self.best
        if best is None:          # nothing smaller reproduced: the original run is the smallest known
            src, sched, limit, rate = self.run_dir, self.events, self.time_limit, None
            size = dims_.originals(self.dims)
        else:
            src, sched, limit, size = best["run"], best["schedule"], best["time_limit"], best["size"]
            rate = {"hits": best["hits"], "tries": best["tries"]}
        shutil.copytree(src, minimal)
        with open(os.path.join(minimal, "results.json")) as f:
            types = sorted(set(json.load(f).get("anomalies") or {}) & set(self.types))
        sched_file = os.path.abspath(os.path.join(opts.out, "schedule.json"))
        with open(sched_file, "w") as f:
            json.dump(sched, f, indent=1)
        replay = shlex.join(run_command(dims_.apply(self.meta, size), sched_file, limit,
                                        os.path.join(opts.out, "replay"), opts.cluster))
        doc = {"run": os.path.abspath(self.run_dir), "anomaly_types": self.types, "minimal_anomalies": types,
               "original": {"schedule": self.events, "time_limit": self.time_limit},
               "minimal": {"schedule": sched, "time_limit": limit, "folder": os.path.abspath(minimal),
                           "from": os.path.abspath(src)},
               "dimensions": dims_.record(self.dims, size),
               "reproduction": rate, "original_reproduced": self.confirmed,
               "rule": {"tries": opts.tries, "need": opts.need},
               "runs_used": self.budget.used, "budget": {"runs": opts.budget_runs, "minutes": opts.budget_minutes},
               "budget_cut_search": self.budget.cut, "seconds": round(time.time() - t0, 1),
               "candidates": [{k: v for k, v in c.items() if k != "folder"} for c in self.candidates],
               "replay": replay}
        with open(os.path.join(opts.out, "shrink.json"), "w") as f:
            json.dump(doc, f, indent=1)
        doc["summary"] = summary(doc)
        return doc

