"""LocalProcesses: the OS processes of a local cluster, started, found again and signalled.

Guarantees: each node runs in its own session (it outlives the command that
started it) and its own cgroup (network faults can target it), with the
repo on its PYTHONPATH and the cluster secret's file (never the secret
itself) in its environment; in a cluster started for clock faults
(cluster.faketime) a service, never ZooKeeper, starts with libfaketime
preloaded and its own clock control file (any other cluster's environment
is as it was); ZooKeeper writes logs/zookeeper.log, a service
writes (and rotates) logs/NAME.log itself and what it prints outside its
logging goes to logs/NAME.out. A node's pid is saved in the cluster's state
as it starts; a pid is only ever signalled after checking that the process
is alive and that its command line belongs to this cluster (the cluster's
directory for ZooKeeper, its ZooKeeper address for a service), so no stray
pid is hit. Mixed into LocalRuntime.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from cluster import faketime, netfilter, procfs, zookeeper
from eoslab.common import auth

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LocalProcesses:
    """Spawning, finding and signalling a LocalRuntime's nodes (its `_procs`, `state` and `dir`)."""

    def _spawn(self, name: str) -> None:
        spec = self._node_specs()[name]
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        if spec["role"] == "zookeeper":
            zdir = os.path.join(self.dir, "zookeeper")
            cmd = zookeeper.command(zookeeper.write_config(zdir, spec["host"], spec["port"]))
        else:
            cmd = [sys.executable, *spec["args"]]
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[auth.SECRET_FILE_ENV] = self.secret_path
        env.pop(auth.SECRET_ENV, None)
        if spec["role"] != "zookeeper" and faketime.enabled(self):   # a cluster started for clock faults
            faketime.clean_env(env)
            env.update(faketime.spawn_env(self, name))
        if spec["role"] == "zookeeper":
            log = open(os.path.join(self.dir, "logs", f"{name}.log"), "ab")
        else:   # the service writes (and rotates) NAME.log itself; stray prints and crashes go to NAME.out
            env["EOSLAB_LOG_FILE"] = os.path.join(self.dir, "logs", f"{name}.log")
            log = open(os.path.join(self.dir, "logs", f"{name}.out"), "ab")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=self.dir)
        log.close()
        netfilter.place(self.slot, name, proc.pid)   # its own cgroup: network faults can target it
        self._procs[name] = proc
        self.state["nodes"][name] = {"pid": proc.pid, "role": spec["role"], "id": spec["id"],
                                     "host": spec["host"], "port": spec["port"]}
        self._save()

    def _owned_pid(self, name: str) -> int | None:
        """The node's pid, only if that process is alive and belongs to this cluster."""
        node = self.state["nodes"].get(name)
        if not node or not node.get("pid"):
            return None
        pid = node["pid"]
        proc = self._procs.get(name)
        if proc is not None and proc.pid == pid:
            return pid if proc.poll() is None else None  # our own child: no need to read /proc
        cmdline = procfs.cmdline(pid)
        if cmdline is None or procfs.gone(pid):
            return None
        marker = self.dir if name == "zookeeper" else self._zk_address()
        return pid if marker in cmdline else None

    def _signal(self, name: str, sig: int) -> bool:
        pid = self._owned_pid(name)
        if pid is None:
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, name: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        proc = self._procs.get(name)
        while time.monotonic() < deadline:
            if proc is not None:
                try:
                    proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
            if self._owned_pid(name) is None:
                return True
            time.sleep(0.02)
        return False

    def node_state(self, name: str) -> str:
        pid = self._owned_pid(name)
        if pid is None or procfs.gone(pid):
            return "dead"
        return "paused" if procfs.paused(pid) else "running"

    def _exit_status(self, name: str) -> str:
        """' (exit code N)' or ' (killed by SIGNAME)' for a node this object started and that ended."""
        proc = self._procs.get(name)
        rc = proc.poll() if proc is not None else None
        if rc is None:
            return ""
        if rc < 0:
            try:
                return f" (killed by {signal.Signals(-rc).name})"
            except ValueError:
                return f" (killed by signal {-rc})"
        return f" (exit code {rc})"
