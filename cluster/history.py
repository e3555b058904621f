"""History recording: what clients and the nemesis did, as Jepsen writes it.

Guarantees: one JSON object per line, written in the order events happen,
with `index` (dense from 0), `time` (ns since the recorder started,
monotonic), `process`, `type` (invoke | ok | fail | info), `f`, `value` and
any extra fields; safe to call from many threads; a line is flushed to the OS
when written, so a crashed run keeps what it recorded. `complete` refuses a
completion for a process with no open invoke (the same rule the checker
enforces), so the recorder cannot write a history the checker rejects.
`note(f, value)` records what the lab itself did or suffered as one lone
`info` op of process "lab" (a workload thread that died: f "lab-error",
value {"kind", "thread", "message", "log"}); the checker skips it as it
skips any op that is not a send, poll or txn, and `notes` keeps the values
recorded so the run can collect them (cluster.lab_errors).
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

LAB = "lab"          # the process of notes: what the lab itself did or suffered


class History:
    def __init__(self, path: str | None):
        self._f = open(path, "w") if path else None
        self._lock = threading.Lock()
        self._t0 = time.monotonic_ns()
        self._index = 0
        self._open: dict[Any, str] = {}       # process -> f of its open invoke
        self.counts = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
        self.notes: list[tuple[str, Any]] = []   # (f, value) of every note, in order

    def _write(self, process, type_: str, f: str, value, extra: dict) -> dict:
        with self._lock:
            op = {"index": self._index, "time": time.monotonic_ns() - self._t0, "process": process,
                  "type": type_, "f": f, "value": value}
            op.update(extra)
            self._index += 1
            self.counts[type_] += 1
            if self._f is not None:
                self._f.write(json.dumps(op, separators=(",", ":")) + "\n")
                self._f.flush()
            return op

    def invoke(self, process, f: str, value, **extra) -> dict:
        with self._lock:
            if process in self._open:
                raise RuntimeError(f"process {process} invokes {f} while {self._open[process]} is open")
            self._open[process] = f
        return self._write(process, "invoke", f, value, extra)

    def complete(self, process, type_: str, f: str, value, **extra) -> dict:
        if type_ not in ("ok", "fail", "info"):
            raise ValueError(f"completion type must be ok, fail or info, got {type_!r}")
        with self._lock:
            if self._open.pop(process, None) is None:
                raise RuntimeError(f"process {process} completes {f} without an open invoke")
        return self._write(process, type_, f, value, extra)

    def nemesis(self, f: str, value, result=None) -> None:
        """A nemesis action: an info pair, as Jepsen records faults."""
        self._write("nemesis", "info", f, value, {})
        self._write("nemesis", "info", f, result if result is not None else value, {})

    def lone(self, process, f: str, value) -> dict:
        """A lone info op of a process that observes rather than acts (the offsets monitor's samples)."""
        return self._write(process, "info", f, value, {})

    def note(self, f: str, value) -> dict:
        """What the lab did or suffered (not a client op, not a fault): a lone info op of process "lab"."""
        with self._lock:
            self.notes.append((f, value))
        return self._write(LAB, "info", f, value, {})

    @property
    def size(self) -> int:
        return self._index

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None
