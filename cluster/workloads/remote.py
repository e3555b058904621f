"""Clients in their own OS processes that record into the run's history (so they can be paused with
SIGSTOP, cut off by cgroup-keyed iptables rules, or killed), and the child's side of the protocol.

Protocol, one JSON object per line. The child writes {"t": "invoke", "f", "value", ...extra} and
waits for the parent's answer: "go" (the invoke is in the history; act now) or "stop" (nothing was
recorded; exit). {"t": "checkpoint", "name"} waits the same way, after the parent's checkpoint hook
ran (the hook may pause or cut the child off before letting it go on). Completions
{"t": "ok" | "fail" | "info", "f", "value", ...extra} need no answer.

Guarantees: an invoke is in the history before the child acts on it; a completion is recorded when
the child reports it; a child that exits (or dies) with an op open gets an `info` completion (the
op may have happened) with error "client process exited"; a child that exits with an error status
(an exception it did not handle), or dies of a signal the parent did not send (`kill`), leaves a
lab-error note in the history (kind "client-process": its name, exit status and the tail of its
stderr log) and in `lab_error`; after an `info` the parent gives the
child a new process number (Jepsen's rule); `halt` makes the child's next invoke or checkpoint a
"stop"; a paused child only ever blocks the reader thread that belongs to it; with a
`gate`, the child's first invoke is neither recorded nor answered before the gate opens (a
child started early, its interpreter loaded, acts only when told).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RemoteClient:
    def __init__(self, history, process, module: str, args: list[str], name: str, new_process,
                 on_checkpoint=None, on_complete=None, log_path: str | None = None,
                 gate: threading.Event | None = None):
        self.history, self.process, self.name = history, process, name
        self.gate = gate                        # set: the child's first invoke waits until it opens
        self.new_process = new_process
        self.on_checkpoint = on_checkpoint or (lambda client, name: None)
        self.on_complete = on_complete or (lambda client, t, f, msg: None)
        self.halting = False
        self.open: tuple | None = None          # (f, value) of the op in flight
        self.exited = threading.Event()
        self.log_path = log_path
        self.lab_error: dict | None = None      # set when the child failed for a reason the parent did not cause
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        err = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1, env=env, cwd=REPO)
        if log_path:
            err.close()
        self.pid = self.proc.pid
        self.reader = threading.Thread(target=self._read, name=f"remote-{name}", daemon=True)
        self.reader.start()

    def _answer(self, word: str) -> None:
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read(self) -> None:
        try:
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                t = msg.pop("t", None)
                f, value = msg.pop("f", None), msg.pop("value", None)
                if t == "invoke":
                    if self.gate is not None:
                        self.gate.wait()
                        self.gate = None
                    if self.halting:
                        self._answer("stop")
                        continue
                    self.history.invoke(self.process, f, value, **msg)
                    self.open = (f, value)
                    self._answer("go")
                elif t == "checkpoint":
                    if not self.halting:
                        self.on_checkpoint(self, msg.get("name"))
                    self._answer("stop" if self.halting else "go")
                elif t in ("ok", "fail", "info") and self.open is not None:
                    self.history.complete(self.process, t, f, value, **msg)
                    self.open = None
                    if t == "info":
                        self.process = self.new_process()
                    self.on_complete(self, t, f, msg)
        finally:
            rc = self.proc.wait()
            if self.open is not None:
                f, value = self.open
                self.history.complete(self.process, "info", f, value, error="client process exited")
                self.open = None
            if rc > 0 or (rc < 0 and not self.halting):
                self._failed(rc)
            self.exited.set()

    def _failed(self, rc: int) -> None:
        how = f"exit status {rc}" if rc > 0 else f"killed by signal {-rc}, not by the workload"
        tail: list[str] = []
        if self.log_path:
            try:
                with open(self.log_path, errors="replace") as f:
                    tail = [ln.rstrip("\n") for ln in f.readlines()[-40:]]
            except OSError:
                pass
        last = next((ln for ln in reversed(tail) if ln.strip()), "")
        self.lab_error = {"kind": "client-process", "process": self.name,
                          "message": f"client process {self.name} ended: {how}" + (f": {last}" if last else ""),
                          "log": tail}
        self.history.note("lab-error", self.lab_error)

    # -- control ----------------------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def halt(self) -> None:
        self.halting = True
        if self.gate is not None:
            self.gate.set()
        self.signal(signal.SIGCONT)
        self._answer("stop")
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def kill(self) -> None:
        """SIGKILL; an op it has open is completed `info` by the reader, none is started any more."""
        self.halting = True
        if self.gate is not None:
            self.gate.set()
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)


class ChildRecorder:
    """The child's side: report ops to the parent, wait for its go-ahead."""

    def __init__(self, inp=None, out=None):
        self.inp, self.out = inp or sys.stdin, out or sys.stdout

    def _send(self, msg: dict) -> None:
        self.out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        self.out.flush()

    def _wait(self) -> bool:
        return self.inp.readline().strip() == "go"

    def invoke(self, f: str, value, **extra) -> bool:
        """True: go on; False: the parent is halting (nothing was recorded)."""
        self._send({"t": "invoke", "f": f, "value": value, **extra})
        return self._wait()

    def checkpoint(self, name: str) -> bool:
        self._send({"t": "checkpoint", "name": name})
        return self._wait()

    def complete(self, t: str, f: str, value, **extra) -> None:
        self._send({"t": t, "f": f, "value": value, **extra})
