"""The size dimensions `eoslab shrink` reduces after the fault schedule and the time limit.

Guarantees: `of_run(meta)` lists only the dimensions the recorded run
really has and `eoslab run` can be given again: its processes (run.json
"concurrency", `--concurrency`, for the workloads whose clients are that
many processes; the copier's `workload.copiers` and the zombie workload's
`workload.slots`, whose processes are their own) and its records (the
txn and zombie workloads' `workload.max-sends`, records per transaction;
the copier's `workload.input-rate`, records per second into its input)
and its partitions (run.json "partitions", `--partitions`, the
workload's topics). A dimension whose
value is already at its floor, or whose recorded setting is not a
number, is left out. `search` halves one dimension at a time, in the
order of `of_run`, toward its floor while the candidate still
reproduces, and keeps the last value that did; it stops at the first
halving that does not reproduce, and before any candidate once the
budget is spent (marking it cut). It takes a predicate over the values,
so it is tested without a cluster (tests/unit/test_shrink.py). `apply`
gives the run.json a candidate replays with: the same run with these
values, so the replay command (cluster.shrink.run_command) carries them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# (workload, option) -> the dimension it sizes and its floor; options are workload.* settings
PROCESS_OPTIONS = {"copier": ("copiers", 1), "zombie": ("slots", 1)}
RECORD_OPTIONS = {"txn": ("max-sends", 1, "records per transaction"),
                  "zombie": ("max-sends", 1, "records per transaction"),
                  "copier": ("input-rate", 10.0, "input records per second")}
CONCURRENCY_WORKLOADS = ("queue", "txn", "pid")      # their clients are --concurrency processes


@dataclass(frozen=True)
class Dimension:
    name: str                  # "processes", "records" or "partitions"
    key: str                   # a run.json key ("concurrency", "partitions": its flag) or a setting "workload.NAME"
    original: float
    floor: float
    what: str                  # how the summary names it

    @property
    def is_setting(self) -> bool:
        return self.key.startswith("workload.")

    @property
    def flag(self) -> str:
        return self.key if self.is_setting else f"--{self.key}"

    def halve(self, v: float) -> float:
        h = v // 2 if isinstance(self.original, int) else round(v / 2, 1)
        return max(self.floor, h)


def _number(text, like: float) -> float | None:
    try:
        v = type(like)(text)
    except (TypeError, ValueError):
        return None
    return v if v == v else None           # not NaN


def of_run(meta: dict) -> list[Dimension]:
    """The run's shrinkable size dimensions (see the module docstring): processes, records, partitions."""
    from cluster.workloads import WORKLOADS, workload_class
    wl = meta.get("workload")
    if wl not in WORKLOADS:
        return []
    options = workload_class(wl).OPTIONS
    settings = meta.get("settings") or {}
    dims = []
    if wl in CONCURRENCY_WORKLOADS and meta.get("concurrency") is not None:
        v = _number(meta["concurrency"], 1)
        if v is not None:
            dims.append(Dimension("processes", "concurrency", v, 1, "processes"))
    if wl in PROCESS_OPTIONS:
        opt, floor = PROCESS_OPTIONS[wl]
        dims.append(_setting_dim("processes", opt, floor, opt.replace("-", " "), options, settings))
    if wl in RECORD_OPTIONS:
        opt, floor, what = RECORD_OPTIONS[wl]
        dims.append(_setting_dim("records", opt, floor, what, options, settings))
    if meta.get("partitions") is not None:
        v = _number(meta["partitions"], 1)
        if v is not None:
            dims.append(Dimension("partitions", "partitions", v, 1, "partitions"))
    return [d for d in dims if d is not None and d.original > d.floor]


def _setting_dim(name, opt, floor, what, options, settings) -> Dimension | None:
    if opt not in options:
        return None
    default = options[opt][1]
    v = _number(settings.get(f"workload.{opt}", default), default)
    return None if v is None else Dimension(name, f"workload.{opt}", v, type(default)(floor), what)


def originals(dims: list[Dimension]) -> dict[str, float]:
    return {d.key: d.original for d in dims}


def apply(meta: dict, values: dict[str, float]) -> dict:
    """run.json as a candidate with these dimension values replays it."""
    out = dict(meta, settings=dict(meta.get("settings") or {}))
    for key, v in values.items():
        if key.startswith("workload."):
            out["settings"][key] = f"{v:g}"
        else:
            out[key] = v
    return out


def search(dims: list[Dimension], test: Callable[[dict], bool], budget) -> dict[str, float]:
    """Halve each dimension toward its floor while `test(values)` holds; the last values that held
    (the originals when none did). `budget` is a cluster.shrink.Budget."""
    values = originals(dims)
    for d in dims:
        while values[d.key] > d.floor:
            if budget.exhausted():
                budget.cut = True
                return values
            cand = dict(values, **{d.key: d.halve(values[d.key])})
            if not test(cand):
                break
            values = cand
    return values


def record(dims: list[Dimension], values: dict[str, float]) -> dict:
    """shrink.json's "dimensions": each with its setting, original and minimal value."""
    return {d.name: {"setting": d.flag, "what": d.what, "original": d.original,
                     "minimal": values.get(d.key, d.original)} for d in dims}


def sentence(recorded: dict) -> str:
    """The summary's words for the dimensions: "" when the run has none."""
    if not recorded:
        return ""
    parts = [f"{r['what']} {r['original']:g} -> {r['minimal']:g} ({r['setting']})" for r in recorded.values()]
    return f" Size: {', '.join(parts)}."
