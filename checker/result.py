"""A checker result as the outside world sees it: JSON text, the verdict and exit codes.

Guarantees: `to_json(result)` is one line of valid JSON for any result a
checker returns (tuples and sets become lists, keys that JSON cannot hold
become strings, anything else its str); `exit_code` maps the verdict to the
`eoslab check` / `eoslab run` contract — 0 valid, 1 invalid, 3 unknown, 4
lab-error (2 is bad input, raised before there is a result); `write_results`
writes DIR/results.json.

Lab errors: a run the lab itself broke (a harness or client thread, a
service or the nemesis failing for a reason that is not an injected fault;
cluster.lab_errors finds them and `eoslab run` lists them in run.json's
"lab_errors") has no verdict about Kafka. `with_verdict(result, lab_errors)`
gives every result a "verdict" (valid | invalid | unknown | lab-error) and,
when there are lab errors, makes it "lab-error" whatever the checker found:
"valid" becomes "unknown", the lab errors go in "lab_errors", and the
anomalies move to "unconfirmed" (their counts to stats "unconfirmed_counts"),
so nothing reads them as anomalies of Kafka. `lab_errors_of(history)` reads
them from run.json beside a history, as `run_of` reads the run.
"""
from __future__ import annotations

import json
import os
from typing import Any

from eoslab.common.files import replace_text

EXIT_VALID, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_LAB_ERROR = 0, 1, 2, 3, 4
VALID, INVALID, UNKNOWN, LAB_ERROR = "valid", "invalid", "unknown", "lab-error"
# `eoslab run`'s exit status (cluster.run documents it; `eoslab run --help` shows it): light to import
EXIT_STATUS_HELP = """exit status:
  0  valid      the checker found no anomaly, and the lab ran as intended
  1  anomalies  the checker found anomalies: a verdict about Kafka
  2  error      bad arguments or settings: nothing ran
  3  unknown    the checker ran out of time
  4  lab-error  the lab itself failed, not Kafka (results.json "lab_errors" says why)"""


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {(k if isinstance(k, (str, int, float, bool)) or k is None else str(k)): _plain(v)
                for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return [_plain(v) for v in sorted(x, key=repr)]
    return x


def to_json(result: dict, indent: int | None = None) -> str:
    seps = (",", ":") if indent is None else (",", ": ")
    return json.dumps(_plain(result), default=str, indent=indent, separators=seps)


def verdict(result: dict) -> str:
    """valid | invalid | unknown | lab-error: lab errors first, then what the checker said."""
    if result.get("lab_errors") or result.get("verdict") == LAB_ERROR:
        return LAB_ERROR
    v = result.get("valid")
    return VALID if v is True else INVALID if v is False else UNKNOWN


def with_verdict(result: dict, lab_errors: list | None = None) -> dict:
    """The result with its "verdict" first; with lab errors, the lab-error verdict (see the module
    docstring). A new dict; the checker's own result is left as it was."""
    out = dict(result)
    if lab_errors:
        out["valid"] = UNKNOWN
        out["lab_errors"] = [dict(e) for e in lab_errors]
        out["unconfirmed"] = out.get("anomalies") or {}
        out["anomalies"] = {}
        stats = dict(out.get("stats") or {})
        stats["unconfirmed_counts"] = stats.get("anomaly_counts") or {}
        stats["anomaly_counts"] = {}
        if stats.get("reason"):
            stats["checker_reason"] = stats["reason"]
        kinds = sorted({str(e.get("kind", "?")) for e in lab_errors})
        stats["reason"] = (f"lab error ({len(lab_errors)}: {', '.join(kinds)}): the lab itself failed, so the "
                           f"history says nothing about Kafka")
        out["stats"] = stats
    return {"verdict": verdict(out), **{k: v for k, v in out.items() if k != "verdict"}}


def exit_code(result: dict) -> int:
    if verdict(result) == LAB_ERROR:
        return EXIT_LAB_ERROR
    v = result.get("valid")
    if v is True:
        return EXIT_VALID
    if v is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def write_results(out_dir: str, result: dict) -> str:
    path = os.path.join(out_dir, "results.json")
    replace_text(path, to_json(result, indent=1) + "\n")     # whole: `eoslab serve` may read it meanwhile
    return path


def run_of(history: str) -> dict:
    """What run.json beside the history says the history is of (the Kafka release above all), so
    results and reports name it: the "run" section of a result; {} when there is no run.json (a
    history from elsewhere)."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(history)), "run.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(meta, dict):
        return {}
    return {k: meta[k] for k in ("kafka_version", "workload", "client", "kind", "cmd")
            if isinstance(meta.get(k), (str, int))}


def run_json_of(history: str) -> dict | None:
    """run.json beside the history, whole; None when there is none or it is not a JSON object."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(history)), "run.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def app_run_of(history: str) -> dict | None:
    """run.json beside the history when it is an app run's (`eoslab app run`: "kind": "app"), else None."""
    meta = run_json_of(history)
    return meta if meta is not None and meta.get("kind") == "app" else None


def hang_threshold_of(history: str) -> float | None:
    """run.json's "hang_threshold_s" beside the history (what the run judged long enough for a
    transaction to hold the LSO: its transaction timeout and the coordinator's abort interval),
    None when there is none."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(history)), "run.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    v = meta.get("hang_threshold_s") if isinstance(meta, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def lab_errors_of(history: str) -> list[dict]:
    """The lab errors run.json beside the history lists ("lab_errors"; an "error" the run raised
    before lab errors were recorded counts as one); [] when there is no run.json or none."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(history)), "run.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(meta, dict):
        return []
    errors = [e if isinstance(e, dict) else {"kind": "run", "message": str(e)}
              for e in meta.get("lab_errors") or [] if e]
    if not errors and meta.get("error"):
        errors = [{"kind": "run", "message": str(meta["error"])}]
    return errors
