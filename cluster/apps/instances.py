"""The user's application as N instances: OS processes the lab starts, kills, pauses and cuts off.

Guarantees: each instance index has one current incarnation (a process
group started from the user's command through /bin/sh, in a session of its
own, with the environment of cluster.apps.contract and its output in
DIR/instances/<i>.<k>.log) and possibly older incarnations still alive (a
zombie: replaced while paused or cut off). Every change is recorded in the
history as a lone info op of process "app" (app-start, app-exit with who
ended it, app-pause, app-resume, app-cut, app-uncut, app-zombie), so the
checker and the report can draw one lane per instance. A signal goes to the
whole process group, so a command that forks (a shell, a JVM launcher) is
hit whole. Cutting off needs the local runtime as root with cgroup v2: each
incarnation runs in its own cgroup (placed before the command executes) and
iptables rules tagged with it drop what it sends to every node; `can_cut`
says whether that is possible. `stop_all` ends every process the harness
started: SIGTERM to each process group, `grace_s` for the whole group (not
just the shell) to exit, then SIGKILL to what is left; their rules and
cgroups go too: none outlives the run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from cluster import netfilter
from cluster.apps.contract import environment

WATCH_INTERVAL_S = 0.1
STOP_GRACE_S = 10.0


@dataclass
class Incarnation:
    instance: int
    number: int
    proc: subprocess.Popen
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

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class AppInstances:
    """N instances of one command against one cluster (see the module docstring)."""

    def __init__(self, cmd: str, count: int, history, out_dir: str, *, bootstrap: str, input_topic: str,
                 output_topic: str, group: str, run_id: str, runtime=None, cwd: str | None = None):
        self.cmd, self.count, self.history = cmd, count, history
        self.log_dir = os.path.join(out_dir, "instances")
        os.makedirs(self.log_dir, exist_ok=True)
        self.env = {"bootstrap": bootstrap, "input_topic": input_topic, "output_topic": output_topic,
                    "group": group, "instances": count, "run_id": run_id}
        self.runtime, self.cwd = runtime, cwd
        self.lock = threading.RLock()
        self.current: dict[int, Incarnation] = {}
        self.all: list[Incarnation] = []
        self._numbers: dict[int, int] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="app-watcher", daemon=True)

    # -- what is possible -----------------------------------------------------------------------------
    @property
    def slot(self) -> int | None:
        return getattr(self.runtime, "slot", None)

    def can_cut(self) -> bool:
        return self.slot is not None and os.geteuid() == 0 and netfilter.cgroup2_root() is not None

    # -- lifecycle --------------------------------------------------------------------------------------
    def start_all(self) -> None:
        for i in range(self.count):
            self.start(i)
        self._watcher.start()

    def start(self, i: int) -> Incarnation:
        """A new incarnation of instance i (the old one, if alive, is left as it is: a zombie)."""
        with self.lock:
            k = self._numbers[i] = self._numbers.get(i, -1) + 1
            path = os.path.join(self.log_dir, f"{i}.{k}.log")
            env = {**os.environ, **environment(instance=i, **self.env)}
            cgroup = self._cgroup_procs(f"app-{i}.{k}")
            with open(path, "ab") as log:
                proc = subprocess.Popen(_argv(self.cmd, cgroup), env=env, cwd=self.cwd, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            inc = Incarnation(i, k, proc, path)
            self.current[i] = inc
            self.all.append(inc)
            self.history.lone("app", "app-start", {"instance": i, "incarnation": k, "pid": proc.pid})
            return inc

    def _cgroup_procs(self, name: str) -> str | None:
        if not self.can_cut():
            return None
        path = os.path.join(netfilter.cgroup2_root(), netfilter.node_cgroup(self.slot, name))
        os.makedirs(path, exist_ok=True)
        return os.path.join(path, "cgroup.procs")

    def _watch(self) -> None:
        """Record every exit, whoever caused it."""
        while not self._stop.wait(WATCH_INTERVAL_S):
            self.reap()

    def reap(self) -> None:
        with self.lock:
            for inc in self.all:
                if inc.exited.is_set():
                    continue
                code = inc.proc.poll()
                if code is None:
                    continue
                inc.exit_code, inc.exited_at = code, time.monotonic()
                inc.exited.set()
                self.history.lone("app", "app-exit", {"instance": inc.instance, "incarnation": inc.number,
                                                      "pid": inc.pid, "code": code,
                                                      "by": "lab" if inc.ended_by_lab else "self"})
                self._uncut(inc)
                if self.slot is not None:
                    netfilter.unplace(self.slot, inc.name)

    def live(self) -> list[Incarnation]:
        with self.lock:
            return [inc for inc in self.all if not inc.exited.is_set()]

    # -- faults -----------------------------------------------------------------------------------------
    def kill(self, i: int) -> Incarnation | None:
        with self.lock:
            inc = self.current.get(i)
            if inc is None or inc.exited.is_set():
                return None
            inc.ended_by_lab = True
            inc.signal(signal.SIGKILL)          # a stopped process dies of SIGKILL too
            inc.paused = False
        inc.exited.wait(5)
        self.reap()
        return inc

    def pause(self, inc: Incarnation) -> None:
        with self.lock:
            if inc.exited.is_set() or inc.paused:
                return
            inc.signal(signal.SIGSTOP)
            inc.paused = True
            self.history.lone("app", "app-pause", {"instance": inc.instance, "incarnation": inc.number})

    def resume(self, inc: Incarnation) -> None:
        with self.lock:
            if not inc.paused:
                return
            inc.signal(signal.SIGCONT)
            inc.paused = False
            if not inc.exited.is_set():
                self.history.lone("app", "app-resume", {"instance": inc.instance, "incarnation": inc.number})

    def cut(self, inc: Incarnation) -> None:
        """Drop everything the incarnation sends to any node of the cluster."""
        if not self.can_cut():
            raise RuntimeError("cutting an app instance off needs the local runtime, root and cgroup v2")
        with self.lock:
            if inc.exited.is_set() or inc.cut:
                return
            for node in self.runtime.info().nodes:
                netfilter.drop(self.slot, inc.name, node.host, tag=inc.name)
            inc.cut = True
            self.history.lone("app", "app-cut", {"instance": inc.instance, "incarnation": inc.number})

    def uncut(self, inc: Incarnation) -> None:
        with self.lock:
            if inc.cut and not inc.exited.is_set():
                self.history.lone("app", "app-uncut", {"instance": inc.instance, "incarnation": inc.number})
            self._uncut(inc)

    def _uncut(self, inc: Incarnation) -> None:
        if inc.cut:
            netfilter.remove_tagged(self.slot, inc.name)
            inc.cut = False

    def replace(self, i: int) -> tuple[Incarnation, Incarnation] | None:
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

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """End every process the harness started; nothing outlives this."""
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(5)
        live = self.live()
        for inc in live:
            inc.ended_by_lab = True
            self._uncut(inc)
            inc.signal(signal.SIGCONT)
            inc.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for inc in live:
            try:
                inc.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # the shell may be gone while the command it started still finishes its transaction: the whole
        # group gets the grace period, then whatever is left of it is killed
        while time.monotonic() < deadline and any(_group_alive(inc.pid) for inc in live):
            time.sleep(WATCH_INTERVAL_S)
        for inc in live:
            inc.signal(signal.SIGKILL)
        for inc in live:
            try:
                inc.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.reap()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _argv(cmd: str, procs_file: str | None) -> list[str]:
    """The shell that runs the command; with a cgroup, it joins it before the command runs, so every
    connection the command opens is matched by the cut rules."""
    if procs_file is None:
        return ["/bin/sh", "-c", cmd]
    return ["/bin/sh", "-c", 'echo $$ > "$1" && exec /bin/sh -c "$0"', cmd, procs_file]
