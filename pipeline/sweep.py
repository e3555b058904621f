"""`eoslab sweep`: every chaos run a settings matrix needs, into one store, resumable.

Guarantees: `load_matrix(path)` reads a JSON or TOML file
    {"matrix":  {setting: [value, ...], ...},   # the cartesian product ...
     "fixed":   {setting: value, ...},          # ... plus these in every cell
     "exclude": [{setting: value, ...}, ...],   # minus cells matching all pairs of one entry
     "cells":   [{setting: value, ...}, ...]}   # and/or explicit cells
(a file that is only {setting: [values]} is a matrix) and returns the cells
in file order without duplicates: settings dicts of strings by Kafka's names
(`broker.*` and `topic.*` as `eoslab run --set` takes them). true/false
become "true"/"false"; null leaves a setting unset in that cell. Anything
else raises MatrixError with one line. `plan` makes one
`cluster.run.RunConfig` per workload x fault package x cell x seed (each
cell validated by RunConfig itself: a cell it refuses, such as acks=1 with
enable.idempotence=true, stops the plan with one line naming it, or is left
out with `skip_invalid`), with out = STORE/<workload>/<faults>/<cell>/seed-<n>,
<cell> being the settings as `k=v,...` (characters outside [A-Za-z0-9._=+-]
replaced, a hash added when long or ambiguous). Two names in a cell are not
settings but dimensions of the run: `kafka.version`, the Kafka release of
its runs (RunConfig.kafka_version), and `client`, who sends and polls
(RunConfig.client: a name `eoslab run --client` takes; a workload that
cannot drive that client is refused like any bad cell). `sweep` runs them one after
another with `cluster.run.run` (which starts and tears down its own cluster
per run), skipping a run whose directory already holds a finished run
(run.json without "error", history.jsonl, results.json): an interrupted
sweep resumes where it stopped. It prints one progress line per run (done,
skipped, failed, elapsed, estimated time left; the run's workload, faults,
settings, client and Kafka release, seed) and returns the counts and
the failed runs; a run that fails does not stop the sweep.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
import time
from typing import Any, Iterable

from pipeline.store import config_label, fault_label


class MatrixError(ValueError):
    """A settings matrix that cannot be used: one line for the user."""


def _value(name: str, v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise MatrixError(f"setting {name!r}: values must be strings, numbers, booleans or null, got {v!r}")


def _read(path: str) -> Any:
    if not os.path.isfile(path):
        raise MatrixError(f"--settings-matrix {path}: no such file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if path.endswith(".toml"):
            import tomllib
            return tomllib.loads(raw.decode("utf-8"))
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:      # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise MatrixError(f"--settings-matrix {path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'} "
                          f"({' '.join(str(e).split())})") from None


def _obj(x: Any, what: str) -> dict:
    if not isinstance(x, dict) or not all(isinstance(k, str) and k for k in x):
        raise MatrixError(f"{what} must be an object of setting names")
    return x


def load_matrix(path: str) -> list[dict[str, str]]:
    doc = _read(path)
    if not isinstance(doc, dict):
        raise MatrixError(f"--settings-matrix {path}: expected an object")
    known = {"matrix", "fixed", "exclude", "cells"}
    if not known & set(doc):
        doc = {"matrix": doc}
    extra = set(doc) - known
    if extra:
        raise MatrixError(f"--settings-matrix {path}: unknown section(s) {sorted(extra)}; "
                          f"expected matrix, fixed, exclude, cells")
    matrix = _obj(doc.get("matrix", {}), "'matrix'")
    for k, vs in matrix.items():
        if not isinstance(vs, list) or not vs:
            raise MatrixError(f"'matrix': {k!r} must be a non-empty list of values")
    fixed = {k: _value(k, v) for k, v in _obj(doc.get("fixed", {}), "'fixed'").items()}
    excludes = doc.get("exclude", [])
    explicit = doc.get("cells", [])
    for name, lst in (("exclude", excludes), ("cells", explicit)):
        if not isinstance(lst, list):
            raise MatrixError(f"'{name}' must be a list of objects")
    excludes = [{k: _value(k, v) for k, v in _obj(e, "each 'exclude' entry").items()} for e in excludes]
    raw_cells: list[dict] = []
    if matrix:
        names = list(matrix)
        for combo in itertools.product(*(matrix[n] for n in names)):
            raw_cells.append({n: _value(n, v) for n, v in zip(names, combo)})
    raw_cells += [{k: _value(k, v) for k, v in _obj(c, "each 'cells' entry").items()} for c in explicit]
    if not raw_cells:
        raw_cells = [{}]
    out, seen = [], set()
    for c in raw_cells:
        cell = {k: v for k, v in {**fixed, **c}.items() if v is not None}
        if any(all(cell.get(k) == v for k, v in e.items()) for e in excludes):
            continue
        key = json.dumps(cell, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(cell)
    if not out:
        raise MatrixError(f"--settings-matrix {path}: every cell is excluded")
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


def cell_dir(settings: dict[str, str]) -> str:
    if not settings:
        return "defaults"
    slug = ",".join(f"{_UNSAFE.sub('_', k)}={_UNSAFE.sub('_', v)}" for k, v in sorted(settings.items()))
    exact = ",".join(f"{k}={v}" for k, v in sorted(settings.items()))
    if len(slug) > 120 or slug != exact:
        slug = f"{slug[:100]}-{hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]}"
    return slug


DIMENSIONS = ("kafka.version", "client")     # a cell's names that are RunConfig fields, not settings


def plan(workloads: list[str], nemesis: list[str], cells: list[dict], seeds: Iterable[int], store: str,
         time_limit: float, concurrency: int = 4, skip_invalid: bool = False, log=sys.stderr,
         kafka_version: str | None = None, client: str | None = None) -> list:
    """RunConfigs for workload x fault package x cell x seed. A cell RunConfig refuses raises
    ValueError naming it, or with skip_invalid is left out with one line on `log`. A cell's
    `kafka.version` is the Kafka release of its runs and its `client` their client (matrix
    dimensions like any setting, but RunConfig fields, not settings); `kafka_version` is the
    release of cells that do not name one (default: eoslab's default), `client` their client
    (default: the lab's own)."""
    from cluster.run import RunConfig
    from eoslab import kafka_version as kv
    default_version = kv.get(kafka_version).name
    default_client = client or RunConfig.client
    runs = []
    seeds = list(seeds)
    for workload in workloads:
        for spec in nemesis:
            packages = [p.strip() for p in spec.split(",") if p.strip()] or ["none"]
            for cell in cells:
                first = True
                for seed in seeds:
                    out = os.path.join(store, workload, fault_label(packages), cell_dir(cell), f"seed-{seed}")
                    settings = {k: v for k, v in cell.items() if k not in DIMENSIONS}
                    cfg = RunConfig(workload=workload, nemesis=packages, time_limit=time_limit, seed=seed,
                                    out=out, settings=settings, concurrency=concurrency,
                                    kafka_version=cell.get("kafka.version") or default_version,
                                    client=cell.get("client") or default_client)
                    if first:
                        try:
                            cfg.validate()
                        except ValueError as e:
                            what = f"{workload} | {fault_label(packages)} | {config_label(cell)}: {e}"
                            if not skip_invalid:
                                raise ValueError(what) from None
                            print(f"sweep: left out (refused) {what}", file=log)
                            break
                        first = False
                    runs.append(cfg)
    return runs


def finished(out: str) -> bool:
    """A run that completed: its run.json has no error and no lab error, and history and verdict are there."""
    try:
        with open(os.path.join(out, "run.json")) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and "error" not in meta and not meta.get("lab_errors")
            and os.path.isfile(os.path.join(out, "history.jsonl"))
            and os.path.isfile(os.path.join(out, "results.json")))


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def sweep(runs: list, log=sys.stderr, run_fn=None) -> dict:
    if run_fn is None:
        from cluster.run import run as run_fn
    t0 = time.monotonic()
    from checker.result import EXIT_LAB_ERROR
    done = skipped = 0
    failed: list[dict] = []
    lab: list[dict] = []
    executed_s = 0.0
    executed = 0
    todo = sum(1 for r in runs if not finished(r.out))
    for i, cfg in enumerate(runs, 1):
        what = (f"{cfg.workload} | {fault_label(cfg.nemesis)} | {config_label(cfg.settings)} | "
                f"{cfg.client}, Kafka {cfg.kafka_version} | seed {cfg.seed}")
        left = todo - executed
        eta = f", ~{_clock(executed_s / executed * left)} left" if executed and left else ""
        head = (f"[{i}/{len(runs)}] done {done}, skipped {skipped}, failed {len(failed)}, lab errors {len(lab)}; "
                f"{_clock(time.monotonic() - t0)} elapsed{eta}")
        if finished(cfg.out):
            skipped += 1
            print(f"{head} | skip (already there): {what}", file=log, flush=True)
            continue
        print(f"{head} | run: {what}", file=log, flush=True)
        t1 = time.monotonic()
        try:
            rc = run_fn(cfg, log=log)
        except Exception as e:  # noqa: BLE001 - one failed run does not stop the sweep
            rc, why = 2, f"{type(e).__name__}: {' '.join(str(e).split())}"
        else:
            why = f"exit status {rc}"
        executed_s += time.monotonic() - t1
        executed += 1
        if rc in (0, 1, 3) and finished(cfg.out):
            done += 1
        elif rc == EXIT_LAB_ERROR:
            lab.append({"out": cfg.out, "why": _lab_why(cfg.out)})
            print(f"  lab error, not a verdict about Kafka ({lab[-1]['why']}); {cfg.out}", file=log, flush=True)
        else:
            failed.append({"out": cfg.out, "why": why})
            print(f"  run failed ({why}); {cfg.out}", file=log, flush=True)
    print(f"sweep: {done} done, {skipped} skipped, {len(failed)} failed, {len(lab)} lab errors in "
          f"{_clock(time.monotonic() - t0)}", file=log, flush=True)
    return {"done": done, "skipped": skipped, "failed": len(failed), "lab_errors": len(lab), "failures": failed,
            "lab_error_runs": lab}


def _lab_why(out: str) -> str:
    """The first lab error run.json names, in one line."""
    try:
        with open(os.path.join(out, "run.json")) as fh:
            first = (json.load(fh).get("lab_errors") or [{}])[0]
    except (OSError, ValueError, AttributeError):
        return "see run.json"
    where = first.get("node") or first.get("thread") or first.get("process")
    return (f"{first.get('kind', '?')}" + (f" ({where})" if where else "") + f": {first.get('message', '')}")[:200]
