"""Flags for the services, checked before anything starts.

Guarantees: `check(role, flags)` runs the service's own argument parser on
`flags` (with placeholder values for the flags the runtime always passes)
and starts nothing ($EOSLAB_CHECK_ARGS makes the service return once its
arguments are good); a flag the service does not know, or a value it
refuses, raises ValueError with one line naming the role and the parser's
complaint, so `eoslab cluster up --broker-arg ...` and `eoslab run --set
broker.x=...` fail at once rather than when the service exits at start.
Answers are cached per (role, flags) for the life of the process.
`check_topic_configs` applies the controller's own rules to topic configs.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLES = {
    "broker": ("services.broker", ["--broker-id", "1", "--listen", "127.0.0.1:1", "--zookeeper", "127.0.0.1:1"]),
    "controller": ("services.controller", ["--controller-id", "1", "--listen", "127.0.0.1:1",
                                           "--zookeeper", "127.0.0.1:1"]),
    "txn-coordinator": ("services.txn_coordinator", ["--coordinator-id", "1", "--listen", "127.0.0.1:1",
                                                     "--zookeeper", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1"]),
}


def check(role: str, flags) -> None:
    from eoslab import kafka_version

    def checked_elsewhere(f: str) -> bool:      # a known --kafka-version needs no service start
        name, _, value = f.partition("=")
        return name == "--kafka-version" and value in kafka_version.names()
    flags = tuple(f for f in flags if not checked_elsewhere(f))
    if flags:
        _check(role, flags)


@functools.lru_cache(maxsize=64)
def _check(role: str, flags: tuple[str, ...]) -> None:
    module, base = ROLES[role]
    with tempfile.TemporaryDirectory(prefix="eoslab-args-") as tmp:
        extra = ["--data-dir", tmp] if role == "broker" else []
        env = dict(os.environ, EOSLAB_CHECK_ARGS="1")
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            r = subprocess.run([sys.executable, "-m", module, *base, *extra, *flags], capture_output=True,
                               text=True, env=env, cwd=tmp, timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ValueError(f"{role} flags {' '.join(flags)}: the check did not finish in 60 s") from None
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {r.returncode}"
        why = why.split(": error: ", 1)[-1]
        raise ValueError(f"{role} flags {' '.join(flags)}: {why}")


def check_topic_configs(configs: dict[str, str]) -> None:
    from services.controller.context import validate_configs
    msg = validate_configs(dict(configs))
    if msg is not None:
        raise ValueError(f"topic config: {msg}")
