"""Lab errors: what broke a run that is not the fault being injected, so the run says nothing about Kafka.

A lab error is the lab failing, not Kafka: a workload or client thread that
died with an exception, a client process that crashed, the nemesis failing
to start or stop a fault, a service that is not running when no fault in
force made it so, a service that logged a traceback (or a fatal line) no
injected fault explains, ZooKeeper out of reach outside a ZooKeeper fault,
or the run itself raising. `eoslab run` collects them into run.json's
"lab_errors"; checker.result then gives the run the verdict lab-error
(exit 4), whatever the checker found. Each lab error is plain data:
{"kind", "message", "log": [lines], plus "node" | "thread" | "process" and,
when known, "time" (the log's own timestamp) and "count" (identical ones)}.

Guarantees of the log rules (`classify`), as Jepsen reads a database's logs
(crashes count, what the nemesis did to a node does not):
- a traceback cut short (no exception line) or ending in KeyboardInterrupt /
  SystemExit, in a node the nemesis killed or paused, is the kill itself:
  not a lab error; anywhere else it is one;
- an unhandled exception (a traceback outside the service's own log
  records: in NAME.out, or after "Exception in thread") killed a process or
  one of its threads: always a lab error ("crash"), whatever the fault;
- a traceback a service logged and survived is explained by a fault only
  when it says a peer was out of reach (gRPC UNAVAILABLE / DEADLINE_EXCEEDED
  / CANCELLED, connection refused or reset, a timeout, a retriable Kafka
  error) while a fault, the cluster's start or the final heal was in force
  (each window widened by GRACE_S); a ZooKeeper connection error only while
  a fault that can cut ZooKeeper off was (kill-zookeeper,
  partition-zookeeper, pause, loss) or the start or final heal: otherwise
  "zookeeper-unreachable". Any other logged traceback is a bug the run
  exposed: "traceback". Python's "Exception ignored in" reports are not
  failures and are skipped;
- a fatal line (FATAL_LINES: Fatal Python error, Segmentation fault,
  ZooKeeper exiting abnormally, Java out of memory) is always a lab error.
`LogMark` reads only what the nodes wrote during this run: on the local
runtime by file offsets taken when the run began (a rotated log is read
from its older file too), elsewhere by the log's timestamps (everything
when the run started the cluster itself).
"""
from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, field

GRACE_S = 10.0                        # a fault's effects outlast its stop (elections, sessions, reconnects)
MAX_ERRORS = 50                       # distinct lab errors kept (identical ones are counted, not repeated)
LOG_LINES = 60                        # lines of log kept per lab error
TRACEBACK = "Traceback (most recent call last):"
_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_CHAINED = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")
_SIGNALLED = re.compile(r"^(KeyboardInterrupt|SystemExit)\b")
_FATAL_WORDS = ("Fatal Python error", "Segmentation fault", "exiting abnormally", "java.lang.OutOfMemoryError")
FATAL_LINES = re.compile("|".join(re.escape(w) for w in _FATAL_WORDS))
_UNREACHABLE = re.compile(
    r"StatusCode\.(UNAVAILABLE|DEADLINE_EXCEEDED|CANCELLED)\b|\b(ConnectionRefusedError|ConnectionResetError|"
    r"ConnectionAbortedError|BrokenPipeError|TimeoutError|socket\.timeout)\b")
_ZOOKEEPER = re.compile(r"kazoo\.\S*(ConnectionLoss|SessionExpiredError|ConnectionClosedError|OperationTimeoutError|"
                        r"ConnectionDropped|KazooTimeoutError)\b")
_KAFKA_ERROR = re.compile(r"KafkaError: ([A-Z_]+)")


def _retriable_names() -> frozenset:
    from eoslab.common.errors import RETRIABLE, name
    return frozenset(name(c) for c in RETRIABLE)


# ------------------------------------------------------------------ reading logs
def log_time(line: str) -> float | None:
    """The wall-clock time (s since the epoch) of a service log record's first line, else None."""
    m = _TS.match(line)
    if not m:
        return None
    try:
        return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
    except ValueError:
        return None


@dataclass
class Trace:
    """One traceback (or fatal line) found in a node's log."""
    lines: list[str]                  # the record's first line (when logged) and the traceback
    exception: str | None             # the final exception with its continuation lines; None: cut short
    logged: bool                      # inside a log record the service wrote (it survived the error)
    time: float | None = None         # the record's timestamp
    fatal: bool = False               # a fatal line, not a traceback
    ignored: bool = False             # Python's "Exception ignored in": reported, not raised
    extra: dict = field(default_factory=dict)


def _exception_at(lines: list[str], i: int) -> tuple[int, str | None]:
    """From the line after a traceback header: (index after the traceback, its final exception
    with continuation lines, or None when it is cut short). Chained tracebacks are followed."""
    n = len(lines)
    while True:
        while i < n and lines[i].startswith((" ", "\t")):        # frames, code, carets
            i += 1
        if i >= n or not lines[i].strip() or _TS.match(lines[i]) or lines[i].startswith(TRACEBACK):
            return i, None
        exc = [lines[i]]
        i += 1
        while i < n and (lines[i].startswith((" ", "\t")) or lines[i] == ">") and not _TS.match(lines[i]):
            exc.append(lines[i])
            i += 1
        j = i
        while j < n and not lines[j].strip():
            j += 1
        if j < n and lines[j] in _CHAINED:
            k = j + 1
            while k < n and not lines[k].strip():
                k += 1
            if k < n and lines[k].startswith(TRACEBACK):
                i = k + 1
                continue
        return i, "\n".join(exc)


def _record_time(lines: list[str], i: int, back: int = 200) -> float | None:
    """The timestamp of the log record line i belongs to (the nearest timestamped line at or before it)."""
    for j in range(i, max(-1, i - back), -1):
        if _TS.match(lines[j]):
            return log_time(lines[j])
    return None


def scan(lines: list[str]) -> list[Trace]:
    """The tracebacks and fatal lines in a log's lines, in order (only their neighbourhoods are
    looked at: a long log of ordinary lines costs one pass in C)."""
    found: list[tuple[int, Trace]] = []
    text = "\n".join(lines)

    def line_numbers(positions):
        line_no, last = 0, 0
        for p in positions:
            line_no += text.count("\n", last, p)
            last = p
            yield line_no

    if any(k in text for k in _FATAL_WORDS):
        for i in line_numbers(m.start() for m in FATAL_LINES.finditer(text)):
            found.append((i, Trace([lines[i]], lines[i].strip(), logged=False, fatal=True,
                                   time=_record_time(lines, i))))
    starts, p = [], text.find(TRACEBACK)
    while p != -1:
        if p == 0 or text[p - 1] == "\n":
            starts.append(p)
        p = text.find(TRACEBACK, p + 1)
    heads = list(line_numbers(starts))
    done = -1
    for i in heads:
        if i < done:                               # a chained traceback, already read with its first one
            continue
        lead = lines[i - 1] if i > 0 else ""
        thread_died = lead.startswith("Exception in thread")
        ignored = lead.startswith("Exception ignored in")
        logged = bool(_TS.match(lead)) and not thread_died
        start = i - 1 if (logged or thread_died or ignored) else i
        end, exc = _exception_at(lines, i + 1)
        found.append((i, Trace(lines[start:end], exc, logged, log_time(lead) if logged else None, ignored=ignored)))
        done = max(end, i + 1)
    return [t for _, t in sorted(found, key=lambda x: x[0])]


class LogMark:
    """Where each node's log stood when the run began, so that only the run's own lines are read."""

    def __init__(self, rt, whole: bool = False):
        self.rt, self.whole, self.t0 = rt, whole, time.time()
        self.offsets: dict[str, int] = {}
        self.dir = os.path.join(rt.dir, "logs") if getattr(rt, "name", "") == "local" and hasattr(rt, "dir") else None
        if self.dir and not whole:
            for node in self._nodes():
                for path in self._files(node):
                    try:
                        self.offsets[path] = os.path.getsize(path)
                    except OSError:
                        pass

    def _nodes(self) -> list[str]:
        return [n.name for n in self.rt.info().nodes]

    def _files(self, node: str) -> list[str]:
        return [os.path.join(self.dir, f"{node}.{ext}") for ext in ("log", "out")]

    def _read_since(self, path: str) -> list[str]:
        start = self.offsets.get(path, 0)
        chunks = []
        try:
            size = os.path.getsize(path)
        except OSError:
            return []
        if size < start and os.path.exists(path + ".1"):          # rotated since: the rest of the old file first
            chunks.append(self._read(path + ".1", start))
            start = 0
        elif size < start:
            start = 0
        chunks.append(self._read(path, start))
        return "".join(chunks).splitlines()

    @staticmethod
    def _read(path: str, offset: int) -> str:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def read(self, node: str) -> list[list[str]]:
        """The lines the node wrote since the mark, per log (its own log, then what it printed)."""
        if self.dir:
            return [self._read_since(p) for p in self._files(node)]
        try:
            lines = self.rt.logs(node, 100_000).splitlines()
        except Exception:  # noqa: BLE001 - a runtime that cannot give logs gives none
            return []
        if not self.whole:
            first = next((i for i, ln in enumerate(lines) if (log_time(ln) or 0) >= self.t0 - 1), len(lines))
            lines = lines[first:]
        return [lines]


# ------------------------------------------------------------------ judging what the logs say
def _in(windows: list[tuple[float, float]], t: float | None) -> bool:
    return t is not None and any(a <= t <= b for a, b in windows)


def windows(faults: list[dict], zookeeper: bool, now: float | None = None) -> list[tuple[float, float]]:
    """The wall-clock intervals in which faults (only those that can cut ZooKeeper off, with
    `zookeeper`), the cluster's start or the final heal were in force, each widened by GRACE_S."""
    from cluster.nemesis_packages import PACKAGES
    now = time.time() if now is None else now
    out = []
    for f in faults:
        pkg = PACKAGES.get(f.get("package"))
        if zookeeper and pkg is not None and not pkg.zookeeper_fault and "zookeeper" not in _nodes(f):
            continue
        end = f.get("end")
        out.append((f["start"] - 1.0, (now if end is None else end) + GRACE_S))
    return out


def killed_nodes(faults: list[dict]) -> set[str]:
    """The nodes the nemesis killed or paused (process faults that named their node, or their nodes:
    a disk fault's target is a dict whose "nodes" it killed)."""
    from cluster.nemesis_packages import PACKAGES
    out: set[str] = set()
    for f in faults:
        if getattr(PACKAGES.get(f.get("package")), "process_fault", False):
            out.update(_nodes(f))
    return out


def _nodes(fault: dict) -> list[str]:
    """The nodes a fault names: its target, or its target's "nodes" (a disk fault's power loss, which may
    take ZooKeeper down with the brokers)."""
    target = fault.get("target")
    if isinstance(target, str):
        return [target]
    if isinstance(target, dict) and isinstance(target.get("nodes"), list):
        return [n for n in target["nodes"] if isinstance(n, str)]
    return []


def _kafka_retriable(exc: str) -> bool:
    m = _KAFKA_ERROR.search(exc)
    return bool(m) and m.group(1) in _retriable_names()


def classify(node: str, traces: list[Trace], faults: list[dict], now: float | None = None) -> list[dict]:
    """The lab errors among a node's traces (see the module docstring); `faults` as
    NemesisRunner.faults records them, plus the run's "startup" and "heal" windows."""
    any_fault, zk_fault = windows(faults, False, now), windows(faults, True, now)
    killed = node in killed_nodes(faults)
    out = []
    for tr in traces:
        first = (tr.exception or "").splitlines()[0] if tr.exception else ""
        if tr.fatal:
            out.append(_error("fatal", node, f"fatal line in {node}'s log: {first}", tr))
            continue
        if tr.ignored:
            continue
        if tr.exception is None or _SIGNALLED.match(first):
            if killed:
                continue                                  # the kill cut it short or stopped it
            why = (f"{node} was stopped ({first}) and no fault stopped it" if first else
                   f"a traceback cut short in {node}'s log, and no fault killed {node}")
            out.append(_error("crash" if not tr.logged else "traceback", node, why, tr))
            continue
        if not tr.logged:
            out.append(_error("crash", node, f"{node}: an unhandled exception ended the process or one of its "
                                             f"threads: {first}", tr))
            continue
        if _ZOOKEEPER.search(tr.exception):
            if not _in(zk_fault, tr.time):
                out.append(_error("zookeeper-unreachable", node, f"{node} lost ZooKeeper outside a ZooKeeper "
                                                                 f"fault: {first}", tr))
            continue
        if _UNREACHABLE.search(tr.exception) or _kafka_retriable(tr.exception):
            if not _in(any_fault, tr.time):
                out.append(_error("traceback", node, f"{node}: a peer out of reach outside any fault: {first}", tr))
            continue
        out.append(_error("traceback", node, f"{node} logged a traceback no injected fault explains: {first}", tr))
    return out


def _error(kind: str, node: str, message: str, tr: Trace) -> dict:
    e = {"kind": kind, "node": node, "message": message[:500], "log": tr.lines[:LOG_LINES]}
    if tr.time is not None:
        e["time"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(tr.time)) + f",{int(tr.time * 1000) % 1000:03d}"
    return e


# ------------------------------------------------------------------ what the run collects
def scan_logs(rt, mark: LogMark, faults: list[dict]) -> list[dict]:
    """Lab errors in the logs every node wrote during the run."""
    out = []
    for n in rt.info().nodes:
        for lines in mark.read(n.name):
            out += classify(n.name, scan(lines), faults)
    return out


def nodes_down(rt, when: str, lines: int = 30, settle: float = 3.0) -> list[dict]:
    """A lab error for every node that is not running (call it when no fault is in force; a node
    gets `settle` seconds to finish a resume or restart the nemesis has just made), and for a
    ZooKeeper that does not take a connection."""
    out = []
    deadline = time.monotonic() + settle
    info = rt.info()
    while any(n.state != "running" for n in info.nodes) and time.monotonic() < deadline:
        time.sleep(0.2)
        info = rt.info()
    for n in info.nodes:
        if n.state != "running":
            out.append({"kind": "service-down", "node": n.name,
                        "message": f"{n.name} was {n.state} {when}, with no fault in force that made it so",
                        "log": _tail(rt, n.name, lines)})
        elif n.role == "zookeeper" and getattr(rt, "name", "") == "local" and not _answers(n.host, n.port):
            out.append({"kind": "zookeeper-unreachable", "node": n.name,
                        "message": f"ZooKeeper ({n.address}) refused connections {when}, outside a ZooKeeper fault",
                        "log": _tail(rt, n.name, lines)})
    return out


def _answers(host: str, port: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


def _tail(rt, node: str, lines: int) -> list[str]:
    try:
        return rt.logs(node, lines).splitlines()[-lines:]
    except Exception:  # noqa: BLE001 - no log is no reason to lose the error
        return []


def nemesis_errors(errors: list[str]) -> list[dict]:
    return [{"kind": "nemesis", "message": f"the nemesis failed: {e}"[:500], "log": [str(e)]} for e in errors]


def run_error(exc: BaseException, tb: str) -> dict:
    return {"kind": "run", "message": f"the run raised {type(exc).__name__}: {exc}"[:500],
            "log": tb.rstrip("\n").splitlines()[-LOG_LINES:]}


def from_notes(history) -> list[dict]:
    """The lab errors the history's notes recorded (threads and client processes that died)."""
    return [dict(v) for f, v in getattr(history, "notes", []) if f == "lab-error" and isinstance(v, dict)]


def merge(errors: list[dict]) -> list[dict]:
    """Identical lab errors (kind, where, message) once each with their "count"; at most MAX_ERRORS."""
    seen: dict[tuple, dict] = {}
    for e in errors:
        key = (e.get("kind"), e.get("node") or e.get("thread") or e.get("process"), e.get("message"))
        if key in seen:
            seen[key]["count"] = seen[key].get("count", 1) + 1
        else:
            seen[key] = dict(e)
    out = list(seen.values())
    if len(out) > MAX_ERRORS:
        out = out[:MAX_ERRORS] + [{"kind": "more", "message": f"{len(out) - MAX_ERRORS} more lab errors not listed",
                                   "log": []}]
    return out
