"""What `eoslab serve` shows: a store's runs read into rows, never failing on one run.

Guarantees: `check_store(path)` returns the store's real path, or raises
NotAStore with one line: a path that does not exist, that is not a
directory, or that holds entries but no run folder. An empty directory is a
store (one a sweep is about to fill). `Scanner(store).scan()` walks the
store on every call (sorted, hidden directories skipped, symlinked
directories not followed) and returns {"store", "runs", "matrix", "counts",
"generation", "scanned"}; it never raises for what one run holds.

A run folder is one holding run.json, history.jsonl(.gz) or results.json.
The store's root may itself be one, and a run folder may hold others (the
shrunk run kept inside its original's folder, which `eoslab analyze` leaves
out of the matrix: pipeline.store does not look inside run folders). A
folder holding index.html beside matrix.csv or matrix.parquet is a matrix
page (`eoslab analyze --out` inside the store), not a run.

Each row has the run's id (its path under the store), workload, client
and client version (pipeline.store's client_label and client_version, as
the matrix reads them: "eoslab", the lab's own, when run.json names none),
Kafka release, fault packages, seed, configuration, start time,
verdict, anomaly classes with counts (for a lab error: what broke), links,
"problems" and "notes" (one line each). The verdict is results.json's
"verdict" (valid | invalid, shown as "anomalies" | unknown | lab-error); a
results.json without one (an older format) gets it from "lab_errors" and
"valid" as checker.result does, with a note saying so. A run without
results.json and without a problem is "pending" (running, or stopped
before the checker ran). A run whose run.json is missing, unreadable or not
an object, whose history is missing, or whose results.json is unreadable or
says nothing about validity is "broken", its problems naming why. A folder
`eoslab scenario run` wrote (no run.json; results.json's "scenario" names
it) is a run: workload "scenario", the scenario's name as its faults.

Shrunk runs: run.json's "shrunk_from" names the run a shrunk run was cut
down from: the original's folder, relative to the shrunk run's own folder
("../seed-3" beside it, ".." for one kept in RUN/shrunk/) or absolute. The
original's row lists its shrunk runs ("shrunk"); the shrunk run's row names
the original ("shrunk_from") when it is a run of this store, else says
where it points ("shrunk_from_missing").

Parsed files are cached by (mtime, size), so a re-scan reads only what changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any
from urllib.parse import quote

from pipeline.store import HISTORY_NAMES, client_label, client_version, config_label, fault_label, kafka_version

RUN_FILES = ("run.json", "results.json", *HISTORY_NAMES)
VERDICTS = {"valid": "valid", "invalid": "anomalies", "unknown": "unknown", "lab-error": "lab-error"}


class NotAStore(ValueError):
    """A path `eoslab serve` cannot serve: the message is one line for the user."""


def _is_run(files) -> bool:
    return any(n in files for n in RUN_FILES)


def _is_matrix(files) -> bool:
    return "index.html" in files and ("matrix.csv" in files or "matrix.parquet" in files)


def check_store(path: str) -> str:
    if not os.path.exists(path):
        raise NotAStore(f"{path}: no such directory")
    if not os.path.isdir(path):
        raise NotAStore(f"{path}: not a directory (a store is the folder `eoslab sweep --out` "
                        f"or `eoslab run --out` writes)")
    real = os.path.realpath(path)
    try:
        if not os.listdir(real):
            return real
    except OSError as e:
        raise NotAStore(f"{path}: cannot read it ({e.strerror})") from None
    for _root, dirs, files in os.walk(real):
        if _is_run(files):
            return real
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    raise NotAStore(f"{path}: not a store: no run folder (run.json, history.jsonl or results.json) under it")


def href(rel: str) -> str:
    """The URL of a file under the store."""
    return "/store/" + quote(rel.replace(os.sep, "/"), safe="/")


def _one_line(x: Any, limit: int = 300) -> str:
    return " ".join(str(x).split())[:limit]


class Scanner:
    def __init__(self, store: str):
        self.store = os.path.realpath(store)
        self._cache: dict[str, tuple[tuple, Any]] = {}

    def _json(self, path: str) -> tuple[str, Any]:
        """("ok", value) | ("missing", None) | ("bad", why); cached by mtime and size."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return "missing", None
        except OSError as e:
            return "bad", f"cannot read it ({e.strerror})"
        key = (st.st_mtime_ns, st.st_size)
        hit = self._cache.get(path)
        if hit and hit[0] == key:
            return hit[1]
        try:
            with open(path, encoding="utf-8") as fh:
                got = ("ok", json.load(fh))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            got = ("bad", f"not valid JSON ({_one_line(e, 120)})")
        if path.endswith("results.json") and got[0] == "ok":
            got = ("ok", _results_summary(got[1]))        # keep what the page shows, not the witnesses
        self._cache[path] = (key, got)
        return got

    def scan(self) -> dict:
        runs, matrix, seen = [], [], set()
        for root, dirs, files in os.walk(self.store):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            rel = os.path.relpath(root, self.store)
            rel = "" if rel == "." else rel.replace(os.sep, "/")
            if _is_matrix(files):
                matrix.append({"dir": rel or ".", "href": href(os.path.join(rel, "index.html"))})
                dirs[:] = []
            elif _is_run(files):         # and look inside: a shrunk run may live in its original's folder
                runs.append(self._row(root, rel, set(files)))
                seen.add(root)
        self._cache = {p: v for p, v in self._cache.items() if os.path.dirname(p) in seen}
        _link_shrunk(runs, self.store)
        _matrix_reports(runs, matrix, self.store)
        counts: dict[str, int] = {}
        for r in runs:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        body = json.dumps([runs, matrix], sort_keys=True, default=str)
        return {"store": self.store, "runs": runs, "matrix": matrix, "counts": counts,
                "generation": hashlib.sha1(body.encode()).hexdigest()[:16],
                "scanned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def _row(self, d: str, rel: str, files: set[str]) -> dict:
        rid = rel or os.path.basename(self.store)
        problems, notes = [], []
        row: dict[str, Any] = {"id": rid, "dir": rel, "workload": "?", "client": "?", "client_version": "",
                               "kafka": "unknown", "faults": "?", "seed": None, "config": "?", "started": "",
                               "anomalies": [], "unconfirmed": [], "why": "", "report": None,
                               "results": None, "run_json": None, "shrunk_from": None,
                               "shrunk_from_missing": None, "shrunk": []}
        st, meta = self._json(os.path.join(d, "run.json"))
        if st == "ok" and not isinstance(meta, dict):
            st, meta = "bad", "not a JSON object"
        rst, res = self._json(os.path.join(d, "results.json"))
        scenario = res.get("scenario") if rst == "ok" and isinstance(res, dict) else None
        if st == "missing" and scenario:
            _from_scenario(row, scenario, notes)
        elif st == "missing":
            problems.append("no run.json")
        elif st == "bad":
            problems.append(f"run.json: {meta}")
            row["run_json"] = href(os.path.join(rel, "run.json"))          # to look at what is wrong
        else:
            row["run_json"] = href(os.path.join(rel, "run.json"))
            _from_meta(row, meta, d, notes)
            if meta.get("error"):
                notes.append(f"run failed: {_one_line(meta['error'], 200)}")
        if not any(n in files for n in HISTORY_NAMES):
            problems.append("no history.jsonl")
        if "report.html" in files:
            row["report"] = href(os.path.join(rel, "report.html"))
        st, verdict = rst, "pending"
        if st == "bad":
            problems.append(f"results.json: {res}")
            row["results"] = href(os.path.join(rel, "results.json"))
        elif st == "ok":
            row["results"] = href(os.path.join(rel, "results.json"))
            if not isinstance(res, dict) or res.get("verdict") is None and "valid" not in res:
                problems.append("results.json: no verdict and no valid field (not a checker result)")
            else:
                verdict = res["verdict"]
                if not res["has_verdict"]:
                    notes.append("older results.json: no verdict field, read from valid and lab_errors")
                row.update(anomalies=res["anomalies"], unconfirmed=res["unconfirmed"], why=res["why"])
        elif not problems:
            notes.append("no results.json yet: running, or stopped before the checker ran")
        row["verdict"] = "broken" if problems else verdict
        row["problems"], row["notes"] = problems, notes
        return row


def _from_scenario(row: dict, sc: dict, notes: list) -> None:
    """A folder `eoslab scenario run --out` wrote: no run.json, results.json's "scenario" says what ran."""
    name = str(sc.get("name") or "?")
    row.update(workload="scenario", faults=name, config=_one_line(sc.get("cluster") or "?", 200),
               kafka=kafka_version(sc.get("kafka_version")))
    expected, observed = sc.get("expected"), sc.get("observed")
    verdict = "as expected" if sc.get("match") is True else "NOT as expected" if sc.get("match") is False else "?"
    notes.append(_one_line(f"scenario {name}: expected {expected}, observed {observed}: {verdict}"))


def _from_meta(row: dict, meta: dict, d: str, notes: list) -> None:
    row["workload"] = str(meta.get("workload") or "?")
    row["client"] = client_label(meta.get("client"))                 # the matrix's rule, so both agree
    row["client_version"] = client_version(meta)
    row["kafka"] = kafka_version(meta.get("kafka_version"))
    nemesis = meta.get("nemesis")
    row["faults"] = fault_label(nemesis) if isinstance(nemesis, (list, str)) or nemesis is None else "?"
    seed = meta.get("seed")
    row["seed"] = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    settings = meta.get("settings")
    row["config"] = config_label(settings or {}) if isinstance(settings, dict) or not settings else "?"
    row["started"] = str(meta.get("started") or "")
    for k in ("time_limit", "concurrency", "partitions", "ops"):          # what a shrink cuts down
        v = meta.get(k)
        row[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    sched = meta.get("schedule")
    row["scheduled_faults"] = len(sched) if isinstance(sched, list) else None
    missing = [k for k in ("workload", "nemesis", "seed", "kafka_version", "client") if k not in meta]
    if missing:
        notes.append(f"run.json has no {', '.join(missing)} (an older or synthetic run)")
    sf = meta.get("shrunk_from")
    if isinstance(sf, str) and sf.strip():
        row["_shrunk_from_path"] = os.path.realpath(os.path.join(d, sf.strip()))
        row["_shrunk_from_raw"] = sf.strip()


def _counts(anoms: Any, counts: Any) -> list[dict]:
    if not isinstance(anoms, dict):
        return []
    counts = counts if isinstance(counts, dict) else {}
    out = []
    for k in sorted(anoms):
        n = counts.get(k)
        if not isinstance(n, int):
            n = len(anoms[k]) if isinstance(anoms[k], (list, dict)) else 1
        out.append({"type": str(k), "count": n})
    return out


def _results_summary(res: Any) -> Any:
    if not isinstance(res, dict) or (res.get("verdict") is None and "valid" not in res):
        return res if not isinstance(res, dict) else {}
    stats = res.get("stats") if isinstance(res.get("stats"), dict) else {}
    v = res.get("verdict")
    has = v in VERDICTS
    if not has:
        v = ("lab-error" if res.get("lab_errors") else "valid" if res.get("valid") is True
             else "invalid" if res.get("valid") is False else "unknown")
    why = ""
    errors = res.get("lab_errors") if isinstance(res.get("lab_errors"), list) else []
    if v == "lab-error" and errors and isinstance(errors[0], dict):     # what broke, in the lab's words
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        why = _one_line(f"{errors[0].get('kind', '?')}: {errors[0].get('message', '')}") + more
    elif v in ("lab-error", "unknown"):
        why = _one_line(stats.get("reason") or "")
    scenario = res.get("scenario") if isinstance(res.get("scenario"), dict) else None
    if scenario:
        scenario = {k: scenario.get(k) for k in ("name", "expected", "observed", "match", "cluster", "kafka_version")}
    return {"verdict": VERDICTS[v], "has_verdict": has, "why": why, "scenario": scenario,
            "anomalies": _counts(res.get("anomalies"), stats.get("anomaly_counts")),
            "unconfirmed": _counts(res.get("unconfirmed"), stats.get("unconfirmed_counts"))}


def _link_shrunk(runs: list[dict], store: str) -> None:
    by_dir = {os.path.realpath(os.path.join(store, r["dir"])): r for r in runs}
    for r in runs:
        path = r.pop("_shrunk_from_path", None)
        raw = r.pop("_shrunk_from_raw", None)
        if path is None:
            continue
        orig = by_dir.get(path)
        if orig is not None and orig is not r:
            r["shrunk_from"] = orig["id"]
            orig["shrunk"].append(r["id"])
        else:
            r["shrunk_from_missing"] = f"shrunk_from {raw!r} is not a run of this store"


def _matrix_reports(runs: list[dict], matrix: list[dict], store: str) -> None:
    """A run without its own report.html links the one `eoslab analyze --write-reports` wrote for it."""
    for r in runs:
        if r["report"] or not r["dir"]:
            continue
        for m in matrix:
            rel = os.path.join("" if m["dir"] == "." else m["dir"], "reports", r["dir"], "report.html")
            if os.path.isfile(os.path.join(store, rel)):
                r["report"] = href(rel)
                break
