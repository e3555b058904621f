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
import time
from dataclasses import dataclass

from cluster import netfilter
from cluster.apps.contract import environment
from cluster.apps.instance_set import IncarnationState, InstanceSet

STOP_GRACE_S = 10.0


@dataclass
class Incarnation(IncarnationState):
    proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class AppInstances(InstanceSet):
    """N instances of one command as process groups of this machine (see the module docstring)."""

    def __init__(self, cmd: str, count: int, history, out_dir: str, *, bootstrap: str, input_topic: str,
                 output_topic: str, group: str, run_id: str, runtime=None, cwd: str | None = None):
        super().__init__(cmd, count, history, out_dir, bootstrap=bootstrap, input_topic=input_topic,
                         output_topic=output_topic, group=group, run_id=run_id)
        self.runtime, self.cwd = runtime, cwd

    @property
    def slot(self) -> int | None:
        return getattr(self.runtime, "slot", None)

    def can_cut(self) -> bool:
        return self.slot is not None and os.geteuid() == 0 and netfilter.cgroup2_root() is not None

    def _launch(self, i: int, k: int, log_path: str) -> Incarnation:
        env = {**os.environ, **environment(instance=i, **self.env)}
        cgroup = self._cgroup_procs(f"app-{i}.{k}")
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(_argv(self.cmd, cgroup), env=env, cwd=self.cwd, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        inc = Incarnation(i, k, log_path, proc=proc)
        self._record("app-start", inc, pid=proc.pid)
        return inc

    def _cgroup_procs(self, name: str) -> str | None:
        if not self.can_cut():
            return None
        path = os.path.join(netfilter.cgroup2_root(), netfilter.node_cgroup(self.slot, name))
        os.makedirs(path, exist_ok=True)
        return os.path.join(path, "cgroup.procs")

    def reap(self) -> None:
        with self.lock:
            for inc in self.live():
                code = inc.proc.poll()
                if code is None:
                    continue
                self._exited(inc, code)
                self._uncut(inc)
                if self.slot is not None:
                    netfilter.unplace(self.slot, inc.name)

    def _kill(self, inc: Incarnation) -> None:
        inc.signal(signal.SIGKILL)          # a stopped process dies of SIGKILL too

    def _freeze(self, inc: Incarnation) -> None:
        inc.signal(signal.SIGSTOP)

    def _thaw(self, inc: Incarnation) -> None:
        inc.signal(signal.SIGCONT)

    def _drop(self, inc: Incarnation) -> None:
        if not self.can_cut():
            raise RuntimeError("cutting an app instance off needs the local runtime, root and cgroup v2")
        for node in self.runtime.info().nodes:
            netfilter.drop(self.slot, inc.name, node.host, tag=inc.name)

    def _undrop(self, inc: Incarnation) -> None:
        netfilter.remove_tagged(self.slot, inc.name)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """End every process the harness started; nothing outlives this."""
        self._stop_watching()
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
            time.sleep(self.WATCH_INTERVAL_S)
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
