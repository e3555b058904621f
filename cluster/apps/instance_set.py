"""What every set of app instances shares, whatever runs them (OS processes, containers).

Guarantees: `InstanceSet` keeps, per instance index, its current
incarnation and every incarnation ever started (`current`, `all`, numbered
from 0 per index), and records every change in the history as a lone info
op of process "app": app-start (by the runtime's `_launch`), app-exit with
who ended it (`_exited`), app-pause / app-resume, app-cut / app-uncut and
app-zombie, each recorded only when the change happened (pausing a paused
or dead incarnation records nothing). A runtime supplies how to launch,
reap, kill, freeze, thaw, cut and uncut one incarnation and how to stop
them all; `replace` and `restore` are the same for every runtime. Every
incarnation has the fields of `IncarnationState`.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field


@dataclass
class IncarnationState:
    instance: int
    number: int
    log_path: str
    started: float = field(default_factory=time.monotonic)
    paused: bool = False
    cut: bool = False
    ended_by_lab: bool = False
    exit_code: int | None = None
    exited_at: float | None = None
    exited: threading.Event = field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return f"app-{self.instance}.{self.number}"


class InstanceSet:
    WATCH_INTERVAL_S = 0.1

    def __init__(self, cmd: str, count: int, history, out_dir: str, *, bootstrap: str, input_topic: str,
                 output_topic: str, group: str, run_id: str):
        self.cmd, self.count, self.history = cmd, count, history
        self.log_dir = os.path.join(out_dir, "instances")
        os.makedirs(self.log_dir, exist_ok=True)
        self.env = {"bootstrap": bootstrap, "input_topic": input_topic, "output_topic": output_topic,
                    "group": group, "instances": count, "run_id": run_id}
        self.run_id = run_id
        self.lock = threading.RLock()
        self.current: dict[int, IncarnationState] = {}
        self.all: list[IncarnationState] = []
        self._numbers: dict[int, int] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="app-watcher", daemon=True)

    # -- what a runtime supplies --------------------------------------------------------------------------
    def can_cut(self) -> bool:
        raise NotImplementedError

    def _launch(self, i: int, k: int, log_path: str) -> IncarnationState:
        raise NotImplementedError

    def reap(self) -> None:
        raise NotImplementedError

    def _kill(self, inc) -> None:
        raise NotImplementedError

    def _freeze(self, inc) -> bool | None:
        """Freeze it; False when there was nothing to freeze (it exited meanwhile)."""
        raise NotImplementedError

    def _thaw(self, inc) -> None:
        raise NotImplementedError

    def _drop(self, inc) -> None:
        raise NotImplementedError

    def _undrop(self, inc) -> None:
        raise NotImplementedError

    def stop_all(self, grace_s: float) -> None:
        raise NotImplementedError

    # -- bookkeeping --------------------------------------------------------------------------------------
    def _record(self, f: str, inc, **extra) -> None:
        self.history.lone("app", f, {"instance": inc.instance, "incarnation": inc.number, **extra})

    def _exited(self, inc, code: int) -> None:
        """An incarnation's exit, seen: recorded once, with who ended it."""
        inc.exit_code, inc.exited_at = code, time.monotonic()
        inc.paused = False
        inc.exited.set()
        self._record("app-exit", inc, pid=inc.pid, code=code, by="lab" if inc.ended_by_lab else "self")

    def _watch(self) -> None:
        """Record every exit, whoever caused it."""
        while not self._stop.wait(self.WATCH_INTERVAL_S):
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - a runtime that hiccuped: the next round sees it
                continue

    def _stop_watching(self) -> None:
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(5)

    def live(self) -> list:
        with self.lock:
            return [inc for inc in self.all if not inc.exited.is_set()]

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start_all(self) -> None:
        for i in range(self.count):
            self.start(i)
        self._watcher.start()

    def start(self, i: int):
        """A new incarnation of instance i (the old one, if alive, is left as it is: a zombie)."""
        with self.lock:
            k = self._numbers[i] = self._numbers.get(i, -1) + 1
            inc = self._launch(i, k, os.path.join(self.log_dir, f"{i}.{k}.log"))
            self.current[i] = inc
            self.all.append(inc)
            return inc

    def kill(self, i: int):
        """SIGKILL instance i's current incarnation (a pod killed); it is not restarted here."""
        with self.lock:
            inc = self.current.get(i)
            if inc is None or inc.exited.is_set():
                return None
            inc.ended_by_lab = True
            self._kill(inc)
            inc.paused = False
        deadline = time.monotonic() + 5
        while not inc.exited.is_set() and time.monotonic() < deadline:
            self.reap()
            if not inc.exited.is_set():
                time.sleep(0.05)
        return inc

    def pause(self, inc) -> None:
        with self.lock:
            if inc.exited.is_set() or inc.paused:
                return
            if self._freeze(inc) is False:
                return
            inc.paused = True
            self._record("app-pause", inc)

    def resume(self, inc) -> None:
        with self.lock:
            if not inc.paused:
                return
            self._thaw(inc)
            inc.paused = False
            if not inc.exited.is_set():
                self._record("app-resume", inc)

    def cut(self, inc) -> None:
        """Drop everything the incarnation sends to any node of the cluster."""
        with self.lock:
            if inc.exited.is_set() or inc.cut:
                return
            self._drop(inc)
            inc.cut = True
            self._record("app-cut", inc)

    def uncut(self, inc) -> None:
        with self.lock:
            if inc.cut and not inc.exited.is_set():
                self._record("app-uncut", inc)
            self._uncut(inc)

    def _uncut(self, inc) -> None:
        if inc.cut:
            inc.cut = False
            self._undrop(inc)

    def replace(self, i: int):
        """A replacement for instance i with the same identity while the old incarnation still lives."""
        with self.lock:
            old = self.current.get(i)
            if old is None or old.exited.is_set():
                return None
            new = self.start(i)
            self.history.lone("app", "app-zombie", {"instance": i, "old": old.number, "new": new.number})
            return old, new

    def restore(self) -> None:
        """Every current incarnation running and connected; a dead instance restarted."""
        for inc in self.live():
            self.uncut(inc)
            self.resume(inc)
        self.reap()
        with self.lock:
            for i in range(self.count):
                inc = self.current.get(i)
                if inc is None or (inc.exited.is_set() and inc.ended_by_lab):
                    self.start(i)
