"""A checker result as the outside world sees it: JSON text and exit codes.

Guarantees: `to_json(result)` is one line of valid JSON for any result a
checker returns (tuples and sets become lists, keys that JSON cannot hold
become strings, anything else its str); `exit_code` maps the verdict to the
`eoslab check` contract — 0 valid, 1 invalid, 3 unknown (2 is bad input,
raised before there is a result); `write_results` writes DIR/results.json.
"""
from __future__ import annotations

import json
import os
from typing import Any

EXIT_VALID, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


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


def exit_code(result: dict) -> int:
    v = result.get("valid")
    if v is True:
        return EXIT_VALID
    if v is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def write_results(out_dir: str, result: dict) -> str:
    path = os.path.join(out_dir, "results.json")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(to_json(result, indent=1) + "\n")
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
    return {k: meta[k] for k in ("kafka_version", "workload", "client") if isinstance(meta.get(k), (str, int))}
