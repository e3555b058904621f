"""The user's application as N containers on a Docker cluster's network: AppInstances for the Docker runtime.

Guarantees: the interface, the meaning and the history of
cluster.apps.instances.AppInstances (start_all, start, reap, live, kill,
pause, resume, cut, uncut, replace, restore, stop_all, can_cut; the same
lone "app" ops: app-start, app-exit with who ended it, app-pause,
app-resume, app-cut, app-uncut, app-zombie). Each incarnation k of instance
i is a container `eoslab-app-<run_id>-<i>.<k>` on the cluster's network
(`<project>-net`), from `image` (default: the lab's image), running
`/bin/sh -c CMD` under Docker's init (tini, told by TINI_KILL_PROCESS_GROUP to
signal the shell's whole process group, as the local harness does), with
cluster.apps.contract's environment (the bootstrap is the
cluster's Kafka listeners as containers on that network reach them) and
the working directory bind-mounted read-only at the same path, so a
relative command (`python examples/apps/x.py`) runs as it does locally.
Its output (stdout and stderr) is copied to DIR/instances/<i>.<k>.log when
it exits or is stopped, before its exit is recorded. `pid` is the
container's init process as the host sees it. kill is `docker kill -s
KILL` (a paused container is thawed first: the engine refuses to kill a
frozen one), pause is `docker pause` (the cgroup freezer: a SIGSTOP the
application cannot see or handle). cut drops everything the container
sends to any node of the cluster: one iptables rule in the container's own
network namespace, entered from the host with `nsenter -t PID -n` (root,
nsenter and iptables on the host: `can_cut`); the rule dies with the
namespace, needs nothing in the image and works on a frozen container.
Every container carries the label eoslab.app-run=<run_id>; `stop_all`
stops every one of them (`docker stop -t 10`: SIGTERM, then SIGKILL),
copies their logs and removes them (`docker rm -f`), also the ones that
exited long ago: none outlives the run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cluster.apps.contract import environment
from cluster.apps.instance_set import IncarnationState, InstanceSet

STOP_GRACE_S = 10.0
CUT_COMMENT = "eoslab-app-cut"
LABEL = "eoslab.app-run"


class DockerAppError(RuntimeError):
    pass


@dataclass
class DockerIncarnation(IncarnationState):
    container: object = None       # docker.models.containers.Container
    container_name: str = ""
    pid: int | None = None
    logs_saved: bool = False


class DockerAppInstances(InstanceSet):
    """N instances of one command as containers on a DockerRuntime's network (see the module docstring)."""
    WATCH_INTERVAL_S = 0.25

    def __init__(self, cmd: str, count: int, history, out_dir: str, *, bootstrap: str, input_topic: str,
                 output_topic: str, group: str, run_id: str, runtime, cwd: str | None = None,
                 image: str | None = None):
        super().__init__(cmd, count, history, out_dir, bootstrap=bootstrap, input_topic=input_topic,
                         output_topic=output_topic, group=group, run_id=run_id)
        self.runtime = runtime
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.image = image or runtime.images[0]
        self.network = f"{runtime.project}-net"
        import docker
        from cluster import docker_engine as eng
        self.client = docker.DockerClient(base_url=f"unix://{eng.SOCKET}", version="auto", timeout=60)
        if not eng.image_exists(self.image):
            raise DockerAppError(f"image {self.image} is missing (build it, or give --image)")

    # -- what is possible -----------------------------------------------------------------------------
    def can_cut(self) -> bool:
        return os.geteuid() == 0 and shutil.which("nsenter") is not None and shutil.which("iptables") is not None

    # -- lifecycle --------------------------------------------------------------------------------------
    def _launch(self, i: int, k: int, log_path: str) -> DockerIncarnation:
        cname = f"eoslab-app-{self.run_id}-{i}.{k}"
        try:
            c = self.client.containers.run(
                self.image, ["-c", self.cmd], entrypoint=["/bin/sh"], name=cname, detach=True, init=True,
                environment={**environment(instance=i, **self.env), "TINI_KILL_PROCESS_GROUP": "1"},
                network=self.network, working_dir=self.cwd, volumes={self.cwd: {"bind": self.cwd, "mode": "ro"}},
                labels={LABEL: self.run_id, "eoslab.app-instance": f"{i}.{k}"}, stdin_open=False)
        except Exception as e:  # noqa: BLE001 - docker.errors.*: one readable line
            self._remove_quietly(cname)
            raise DockerAppError(f"starting container {cname} from {self.image}: {e}") from None
        inc = DockerIncarnation(i, k, log_path, container=c, container_name=cname)
        try:
            c.reload()
            inc.pid = c.attrs.get("State", {}).get("Pid") or None
        except Exception:  # noqa: BLE001 - gone already: reap records it
            pass
        open(log_path, "ab").close()
        self._record("app-start", inc, pid=inc.pid, container=cname)
        return inc

    def _remove_quietly(self, cname: str) -> None:
        try:
            self.client.containers.get(cname).remove(force=True)
        except Exception:  # noqa: BLE001 - nothing was created
            pass

    def _states(self) -> dict[str, str]:
        """container name -> status of every container of this run (one sparse API call)."""
        found = self.client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL}={self.run_id}"})
        return {(c.attrs.get("Names") or ["/?"])[0].lstrip("/"): c.attrs.get("State", "") for c in found}

    def reap(self) -> None:
        with self.lock:
            pending = [inc for inc in self.all if not inc.exited.is_set()]
            if not pending:
                return
            states = self._states()
            for inc in pending:
                status = states.get(inc.container_name, "removed")
                if status not in ("exited", "dead", "removed"):
                    continue
                code = -1
                try:
                    inc.container.reload()
                    code = inc.container.attrs.get("State", {}).get("ExitCode", -1)
                except Exception:  # noqa: BLE001 - removed: its code is not known
                    pass
                self._save_logs(inc)
                inc.cut = False              # its rules went with its network namespace
                self._exited(inc, code)

    def _save_logs(self, inc: DockerIncarnation) -> None:
        if inc.logs_saved:
            return
        try:
            data = inc.container.logs(stdout=True, stderr=True)
        except Exception as e:  # noqa: BLE001 - removed already
            data = f"(eoslab: the container's output could not be read: {e})\n".encode()
        with open(inc.log_path, "wb") as f:
            f.write(data)
        inc.logs_saved = True

    # -- faults -----------------------------------------------------------------------------------------
    def _kill(self, inc: DockerIncarnation) -> None:
        try:
            if inc.paused:
                inc.container.unpause()      # the engine refuses to kill a frozen container
            inc.container.kill(signal="KILL")
        except Exception as e:  # noqa: BLE001 - it exited meanwhile
            if "is not running" not in str(e) and "No such container" not in str(e):
                raise DockerAppError(f"kill {inc.container_name}: {e}") from None

    def _freeze(self, inc: DockerIncarnation) -> bool:
        try:
            inc.container.pause()
        except Exception as e:  # noqa: BLE001
            if "is not running" in str(e):
                return False
            raise DockerAppError(f"pause {inc.container_name}: {e}") from None
        return True

    def _thaw(self, inc: DockerIncarnation) -> None:
        try:
            inc.container.unpause()
        except Exception as e:  # noqa: BLE001 - exited or removed meanwhile
            if not inc.exited.is_set() and "is not paused" not in str(e) and "not running" not in str(e):
                raise DockerAppError(f"unpause {inc.container_name}: {e}") from None

    def _iptables(self, inc: DockerIncarnation, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(inc.pid), "-n", "iptables", "-w", *args],
                              capture_output=True, text=True, timeout=30)

    def _rule(self) -> list[str]:
        hosts = ",".join(sorted({n.host for n in self.runtime.info().nodes}))
        return ["OUTPUT", "-d", hosts, "-m", "comment", "--comment", CUT_COMMENT, "-j", "DROP"]

    def _drop(self, inc: DockerIncarnation) -> None:
        if not self.can_cut():
            raise DockerAppError("cutting an app container off needs root, nsenter and iptables on the host")
        if not inc.pid:
            raise DockerAppError(f"{inc.container_name} has no process on the host to cut off")
        r = self._iptables(inc, "-I", *self._rule())
        if r.returncode != 0:
            raise DockerAppError(f"cut {inc.container_name}: iptables: {r.stderr.strip()[-300:]}")

    def _undrop(self, inc: DockerIncarnation) -> None:
        if inc.exited.is_set() or not inc.pid:
            return                           # the rule went with the container's network namespace
        for _ in range(8):                   # every copy of the rule
            if self._iptables(inc, "-D", *self._rule()).returncode != 0:
                break

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop and remove every container the harness started; nothing outlives this."""
        self._stop_watching()
        with self.lock:
            live = self.live()
            for inc in live:
                inc.ended_by_lab = True
                try:
                    self._uncut(inc)
                except Exception:  # noqa: BLE001 - it is stopped whole anyway
                    pass

            def stop(inc: DockerIncarnation) -> None:
                try:
                    if inc.paused:
                        inc.container.unpause()
                    inc.container.stop(timeout=int(grace_s))
                except Exception:  # noqa: BLE001 - exited meanwhile; rm -f below ends it anyway
                    pass

            if live:
                with ThreadPoolExecutor(max_workers=min(16, len(live))) as pool:
                    list(pool.map(stop, live))
            try:
                self.reap()                   # logs copied, exits recorded
            except Exception:  # noqa: BLE001
                pass
            for inc in self.all:
                try:
                    self._save_logs(inc)
                except OSError:
                    pass
            self._remove_all()
            for inc in self.live():         # removed without an exit seen: recorded as ended by the lab
                self._exited(inc, -9)

    def _remove_all(self) -> None:
        """docker rm -f of every container of this run, also any the engine knows that we lost track of."""
        names = {inc.container_name for inc in self.all}
        try:
            names |= {c.name for c in self.client.containers.list(all=True,
                                                                   filters={"label": f"{LABEL}={self.run_id}"})}
        except Exception:  # noqa: BLE001 - the engine hiccuped: remove what we know
            pass
        for name in sorted(names):
            for attempt in range(3):
                try:
                    self.client.containers.get(name).remove(force=True)
                    break
                except Exception as e:  # noqa: BLE001
                    if "No such container" in str(e) or "404" in str(e):
                        break
                    time.sleep(1)
