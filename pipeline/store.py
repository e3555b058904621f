"""A store: a directory tree of run directories, each with run.json and history.jsonl.

Guarantees: `find_runs(store)` walks the tree (sorted, skipping hidden
directories and the directories given in `skip`) and returns one `RunInfo`
per directory holding run.json or history.jsonl(.gz), with the run id its
path relative to the store ('/'-separated). It raises `StoreError` (one
line, naming the run) for: a store that is missing or not a directory, a
store with no runs, a run without history.jsonl or without run.json, a
run.json that is not a JSON object. It never reads histories (executors
do). The configuration label is the run's settings as sorted `key=value`
pairs ("(defaults)" when none); the fault label joins its nemesis packages
with "+" ("none" when none); the Kafka version is run.json's "kafka_version"
("unknown" when absent); the client is run.json's "client" (who sent and
polled: "eoslab", the lab's own client, for runs recorded before the field
existed) and its version the one run.json's "versions" gives for it
(confluent-kafka's with librdkafka's beside it; "" when run.json has none).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

HISTORY_NAMES = ("history.jsonl", "history.jsonl.gz")
DEFAULT_CLIENT = "eoslab"           # the lab's own client: every run before `eoslab run --client`


class StoreError(ValueError):
    """Bad input in a store: the message is one line for the user."""


@dataclass
class RunInfo:
    run: str                        # id: path under the store
    dir: str                        # absolute run directory
    history: str                    # absolute history path
    workload: str
    fault: str
    config: str
    seed: int | None
    settings: dict[str, str] = field(default_factory=dict)
    report: str | None = None       # absolute report.html path, when the run has one
    size: int = 0                   # history bytes (for balancing work)
    kafka_version: str = "unknown"  # run.json's "kafka_version" (the Kafka the cluster spoke)
    client: str = DEFAULT_CLIENT    # run.json's "client" (who sent and polled)
    client_version: str = ""        # that client's version from run.json's "versions", when there

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d["settings"] = json.dumps(self.settings, sort_keys=True)
        return d


def config_label(settings: dict[str, Any]) -> str:
    if not settings:
        return "(defaults)"
    return " ".join(f"{k}={settings[k]}" for k in sorted(settings))


def fault_label(nemesis: Any) -> str:
    if isinstance(nemesis, str):
        nemesis = [n for n in nemesis.split(",") if n]
    packages = [str(n) for n in (nemesis or []) if str(n) != "none"]
    return "+".join(packages) if packages else "none"


def kafka_version(v: Any) -> str:
    """run.json's "kafka_version" as a label: "unknown" when absent or empty."""
    return "unknown" if v is None or (isinstance(v, str) and not v.strip()) else str(v).strip()


def client_label(v: Any) -> str:
    """run.json's "client" as a label: the lab's own client when absent or empty (older runs)."""
    return DEFAULT_CLIENT if v is None or (isinstance(v, str) and not v.strip()) else str(v).strip()


def client_version(meta: dict) -> str:
    """The version of the run's client that run.json's "versions" records ("" when none):
    confluent-kafka's with the librdkafka it wraps, e.g. "2.5.0 (librdkafka 2.5.0)"."""
    client = client_label(meta.get("client"))
    versions = meta.get("versions")
    if not isinstance(versions, dict) or versions.get(client) in (None, ""):
        return ""
    v = str(versions[client])
    if client == "confluent-kafka" and versions.get("librdkafka"):
        v += f" (librdkafka {versions['librdkafka']})"
    return v


def _history(d: str) -> str | None:
    for name in HISTORY_NAMES:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def read_run(store: str, d: str) -> RunInfo:
    run = os.path.relpath(d, store).replace(os.sep, "/")
    if run == ".":
        run = os.path.basename(os.path.abspath(d))
    hist = _history(d)
    if hist is None:
        raise StoreError(f"run {run}: no history.jsonl in {d}")
    meta_path = os.path.join(d, "run.json")
    if not os.path.isfile(meta_path):
        raise StoreError(f"run {run}: no run.json in {d}")
    try:
        with open(meta_path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreError(f"run {run}: run.json is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise StoreError(f"run {run}: run.json is not a JSON object")
    settings = meta.get("settings") or {}
    if not isinstance(settings, dict):
        raise StoreError(f"run {run}: run.json 'settings' is not an object")
    settings = {str(k): str(v) for k, v in settings.items()}
    seed = meta.get("seed")
    report = os.path.join(d, "report.html")
    return RunInfo(run=run, dir=os.path.abspath(d), history=os.path.abspath(hist),
                   workload=str(meta.get("workload") or ("app" if meta.get("kind") == "app" else "?")),
                   fault=fault_label(meta.get("nemesis")),
                   config=config_label(settings), seed=seed if isinstance(seed, int) else None,
                   settings=settings, report=os.path.abspath(report) if os.path.isfile(report) else None,
                   size=os.path.getsize(hist), kafka_version=kafka_version(meta.get("kafka_version")),
                   client=client_label(meta.get("client")), client_version=client_version(meta))


def find_runs(store: str, skip: tuple[str, ...] = ()) -> list[RunInfo]:
    if not os.path.exists(store):
        raise StoreError(f"{store}: no such store directory")
    if not os.path.isdir(store):
        raise StoreError(f"{store}: is not a directory")
    skip_abs = {os.path.realpath(s) for s in skip}
    runs: list[RunInfo] = []
    for root, dirs, files in os.walk(store):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(os.path.join(root, d)) not in skip_abs)
        if "run.json" in files or any(n in files for n in HISTORY_NAMES):
            runs.append(read_run(store, root))
            dirs[:] = []                      # a run directory holds no runs
    if not runs:
        raise StoreError(f"{store}: no runs (directories with run.json and history.jsonl)")
    return runs
