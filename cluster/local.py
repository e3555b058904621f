"""LocalRuntime: a cluster of OS processes on this machine, each on its own loopback address.

Guarantees: ZooKeeper, controllers, brokers and transaction coordinators are separate processes in
their own sessions (they outlive the command that started them); `up`
returns once a controller is active and every broker serves metadata that
lists every broker; `down` stops every process it started (SIGTERM, then
SIGKILL), removes its network rules and its data, and frees the slot; a
process is only ever signalled after checking that its command line belongs
to this cluster (no stray pid is hit). Network partitions use iptables rules
on the cluster's loopback addresses and need root. Each `up` makes a new
cluster secret (file `cluster-secret` in the cluster's directory, owner-only),
hands it to every service ($EOSLAB_CLUSTER_SECRET_FILE) and registers it for
the cluster's hosts in this process, so the harness (fault injection) is a
member and nobody else is. Service logs (logs/NAME.log) rotate; what a
service prints outside its logging goes to logs/NAME.out. With `disk="lazy"`
every broker's data directory and ZooKeeper's are lazy filesystems
(cluster.lazy_disks), each mounted before its node starts and kept across
its kills and restarts; `up` refuses in one line, before anything starts,
where FUSE is unusable; `down` unmounts every lazyfs mount under the
cluster's directory, whoever mounted it, before it removes the data.
A cluster belongs to the process that made it unless it is `standing` (`eoslab cluster up`);
`up` first stops every cluster whose owner died without stopping it (cluster.orphans).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

from cluster import faketime, lazy_disks, netfilter, orphans, procfs, slots, zookeeper
from cluster.local_nodes import KAFKA_PORT, node_specs, zk_address
from cluster.local_processes import REPO, LocalProcesses  # noqa: F401 - REPO re-exported
from cluster.runtime import ClusterInfo, NodeInfo, Runtime
from eoslab.common import auth

logging.getLogger("kazoo").addHandler(logging.NullHandler())
logging.getLogger("kazoo").propagate = False



def default_home() -> str:
    return os.environ.get("EOSLAB_HOME", os.path.join(os.path.expanduser("~"), ".eoslab"))


LAZY_ROLES = ("broker", "zookeeper")     # whose data directories disk="lazy" puts on the lazy filesystem


class ClusterError(RuntimeError):
    pass


class _ZooKeeperLost(ClusterError):
    """ZooKeeper exited with status 1 while the cluster started (its address was taken)."""

    def __init__(self, msg: str, slot: int):
        super().__init__(msg)
        self.slot = slot


class LocalRuntime(LocalProcesses, Runtime):
    name = "local"
    DEFAULT_SESSION_TIMEOUT_MS = 2000       # the services' ZooKeeper session timeout (`cluster up`'s default)

    def __init__(self, cluster_name: str = "default", home: str | None = None, brokers: int = 3,
                 controllers: int = 2, broker_args: list[str] | None = None,
                 controller_args: list[str] | None = None, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 txn_coordinators: int = 2, txn_coordinator_args: list[str] | None = None,
                 disk: str | None = None, standing: bool = False):
        self.cluster_name = cluster_name
        self.dir = os.path.join(home or default_home(), "clusters", cluster_name)
        self.state_path = os.path.join(self.dir, "state.json")
        self.state: dict = {}
        self._procs: dict[str, subprocess.Popen] = {}
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                self.state = json.load(f)
        else:
            if brokers < 1 or controllers < 1:
                raise ClusterError("a cluster needs at least one broker and one controller")
            if brokers > 9 or controllers > 9 or not 0 <= txn_coordinators <= 9:
                raise ClusterError("the local runtime runs at most 9 brokers, 9 controllers and 9 "
                                   "transaction coordinators")
            self.state = {"name": cluster_name, "brokers": brokers, "controllers": controllers,
                          "broker_args": broker_args or [], "controller_args": controller_args or [],
                          "session_timeout_ms": session_timeout_ms, "slot": None, "nodes": {},
                          "txn_coordinators": txn_coordinators,
                          "txn_coordinator_args": txn_coordinator_args or [], "disk": disk,
                          # who the cluster is for: a standing one (`cluster up`) outlives its maker,
                          # any other is stopped as an orphan once this process is gone (cluster.orphans)
                          "owner": None if standing else orphans.owner_record()}
        self._register_secret()

    # -- state ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, cluster_name: str, home: str | None = None) -> "LocalRuntime":
        rt = cls(cluster_name, home)
        if not rt.state.get("slot"):
            raise ClusterError(f"no local cluster named {cluster_name!r} (looked in {rt.dir})")
        return rt

    @property
    def secret_path(self) -> str:
        return os.path.join(self.dir, auth.SECRET_FILE_NAME)

    def _register_secret(self) -> None:
        """Make this process a member of the cluster: its calls to the cluster's hosts carry the secret."""
        if not self.state.get("slot") or not os.path.exists(self.secret_path):
            return
        try:
            secret = auth.read_secret_file(self.secret_path)
        except (OSError, auth.NoSecret):
            return
        auth.register([s["host"] for s in self._node_specs().values()], secret)

    def _save(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self.state_path)

    @property
    def slot(self) -> int:
        return self.state["slot"]

    def _zk_address(self) -> str:
        return zk_address(self.slot)

    def _node_specs(self) -> dict[str, dict]:
        return node_specs(self.state, self.dir)

    # -- Runtime interface --------------------------------------------------------------------------
    def up(self, timeout: float = 60.0) -> ClusterInfo:
        """Start every node; returns once the cluster serves. A ZooKeeper that cannot keep its address
        (it exits at start: another process still holds the slot's ZooKeeper port) is retried in
        another slot, at most twice, saying so on stderr."""
        if self.state.get("slot") and any(self._owned_pid(n) for n in self.state["nodes"]):
            raise ClusterError(f"cluster {self.cluster_name!r} is already running (eoslab cluster down "
                               f"--name {self.cluster_name})")
        why = lazy_disks.refusal(self.state.get("disk"))
        if why:
            raise ClusterError(why)
        orphans.reap()                  # clusters of processes that died without stopping them
        zookeeper.find_zookeeper_classpath()
        zookeeper.java_binary()
        from cluster import service_args
        try:       # a flag a service would refuse fails here, in one line, before anything starts
            for role, key in (("broker", "broker_args"), ("controller", "controller_args"),
                              ("txn-coordinator", "txn_coordinator_args")):
                service_args.check(role, self.state.get(key) or [])
        except ValueError as e:
            raise ClusterError(str(e)) from None
        failed: list[int] = []
        while True:
            try:
                return self._up_in_a_slot(timeout, failed)
            except _ZooKeeperLost as e:
                failed.append(e.slot)
                if len(failed) > 2:
                    raise ClusterError(str(e)) from None
                print(f"eoslab: {self.cluster_name}: {str(e).splitlines()[0]}; starting again in another "
                      f"slot", file=sys.stderr)
                self.state["nodes"] = {}
                self._procs.clear()

    def _up_in_a_slot(self, timeout: float, avoid: list[int]) -> ClusterInfo:
        os.makedirs(self.dir, exist_ok=True)
        self.state["slot"] = slots.acquire(self.dir, avoid)
        self._save()
        auth.write_secret_file(self.secret_path)
        self._register_secret()
        try:
            self._spawn("zookeeper")
            self._wait_zookeeper(timeout)
            for name in self._node_specs():
                if name != "zookeeper":
                    self._spawn(name)
            self.wait_ready(timeout)
        except BaseException as e:
            tails = {n: self.logs(n, 15) for n in self.state.get("nodes", {})}
            slot = self.state["slot"]
            zk = self._procs.get("zookeeper")
            zk_rc = zk.poll() if zk is not None else None
            self.down()
            if isinstance(e, ClusterError):
                detail = "\n".join(f"--- {n} ---\n{t}" for n, t in tails.items() if t.strip())
                msg = f"{e}\n{detail}" if detail else str(e)
                if zk_rc == 1:
                    raise _ZooKeeperLost(msg, slot) from None
                raise ClusterError(msg) from None
            raise
        return self.info()

    def _wait_zookeeper(self, timeout: float) -> None:
        from kazoo.client import KazooClient
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._owned_pid("zookeeper") is None:
                raise ClusterError(f"ZooKeeper exited at start{self._exit_status('zookeeper')}; see "
                                   + os.path.join(self.dir, "logs", "zookeeper.log"))
            zk = KazooClient(hosts=self._zk_address(), timeout=2)
            try:
                zk.start(timeout=1)
                zk.stop()
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.2)
            finally:
                zk.close()
        raise ClusterError("ZooKeeper did not start in time")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the cluster serves (cluster.readiness: a controller is active, every running broker
        lists every running broker and every running transaction coordinator answers); a node that
        exits meanwhile, or the timeout, is a ClusterError naming what was still missing."""
        from cluster import readiness
        deadline = time.monotonic() + timeout
        while (missing := readiness.problem(self.info())) is not None:
            for n in self._node_specs():
                if n in self._procs and self._procs[n].poll() is not None:
                    raise ClusterError(f"{n} exited at start{self._exit_status(n)}; see "
                                       f"{os.path.join(self.dir, 'logs', n + '.log')}")
            if time.monotonic() > deadline:
                raise ClusterError(f"cluster {self.cluster_name!r} not ready after {timeout:.0f}s ({missing}); "
                                   f"logs in {os.path.join(self.dir, 'logs')}")
            time.sleep(0.1)

    def _reload(self) -> None:
        """Take the state on disk when it is this cluster's: another runtime object (the CLI, a nemesis in
        another process) may have restarted nodes since this one read it, under new pids."""
        try:
            with open(self.state_path) as f:
                disk = json.load(f)
        except (OSError, ValueError):
            return
        if disk.get("slot") == self.state.get("slot"):
            self.state = disk

    def down(self) -> None:
        self._reload()
        # only the holder of the slot's lock cleans the slot up: a stale object whose cluster is already
        # down must not heal, kill or release what another cluster now runs in the same slot
        owner = bool(self.state.get("slot")) and slots.owned_by(self.state["slot"], self.dir)
        if owner:
            try:
                self.heal()
            except Exception:  # noqa: BLE001 - rules may not exist
                pass
        order = sorted(self.state.get("nodes", {}), key=lambda n: n == "zookeeper")
        for name in order:
            self._signal(name, signal.SIGCONT)
            self._signal(name, signal.SIGTERM)
        for name in order:
            if not self._wait_gone(name, 5.0):
                self._signal(name, signal.SIGKILL)
                self._wait_gone(name, 5.0)
        if owner:
            netfilter.kill_cgroups(self.state["slot"], cwd=self.dir)   # this cluster's nodes no state names
            netfilter.remove_cgroups(self.state["slot"])
            slots.release(self.state["slot"])
        try:                            # the data may only go once no filesystem is mounted on it
            lazy_disks.unmount_all(self.dir)
        except lazy_disks.LazyFsError as e:
            raise ClusterError(str(e)) from None
        if self.state.get("slot"):      # this process stops sending the old secret to the slot's hosts
            auth.unregister([s["host"] for s in self._node_specs().values()])
        shutil.rmtree(self.dir, ignore_errors=True)
        self.state["slot"] = None

    def info(self) -> ClusterInfo:
        nodes = []
        for name, spec in self._node_specs().items():
            nodes.append(NodeInfo(name, spec["role"], spec["id"], spec["host"], spec["port"],
                                  self.node_state(name), self._owned_pid(name)))
        first = next(n for n in nodes if n.role == "broker")
        bootstrap = ",".join(n.address for n in nodes if n.role == "broker")
        return ClusterInfo(self.cluster_name, "local", bootstrap.split(",")[0] if first else "",
                           self._zk_address(), nodes,
                           kafka_bootstrap=",".join(f"{n.host}:{KAFKA_PORT}" for n in nodes if n.role == "broker"))

    def bootstrap_all(self) -> str:
        return ",".join(n.address for n in self.info().nodes if n.role == "broker")

    def _spawn(self, name: str) -> None:
        if self.state.get("disk") == "lazy" and self._node_specs()[name]["role"] in LAZY_ROLES:
            try:                              # kept when live: the disk outlives the broker's process
                self.disks.ensure(name)
            except lazy_disks.LazyFsError as e:
                raise ClusterError(f"{name}: {e}") from None
        super()._spawn(name)

    @property
    def disks(self) -> lazy_disks.LazyDisks:
        return lazy_disks.LazyDisks(self.dir)

    def disk(self, node: str):
        """The node's lazy filesystem (cluster.lazyfs.LazyFs), for the disk faults; a ClusterError when
        the node's data directory is not one."""
        self._check_node(node)
        if self.state.get("disk") != "lazy" or self._node_specs()[node]["role"] not in LAZY_ROLES:
            raise ClusterError(f"{node}'s data directory is not on a lazy filesystem (a cluster started "
                               f"with disk=\"lazy\" has its brokers' and ZooKeeper's there)")
        return self.disks.fs(node)

    def lazy_disks(self) -> bool:
        return self.state.get("disk") == "lazy"

    def clock_enabled(self) -> bool:
        return faketime.local_enabled(self)

    def enable_clock(self) -> None:
        faketime.enable(self)

    def clock_control_file(self, node: str) -> str:
        self._check_node(node)
        return faketime.control_file(self.dir, node)

    def _check_node(self, node: str) -> None:
        if node not in self._node_specs():
            raise ClusterError(f"no node {node!r} in cluster {self.cluster_name!r} "
                               f"(nodes: {', '.join(self._node_specs())})")

    def kill(self, node: str) -> None:
        self._check_node(node)
        self._signal(node, signal.SIGKILL)
        self._wait_gone(node, 5.0)

    def pause(self, node: str, timeout: float = 5.0) -> None:
        """SIGSTOP, and back only once every thread of the node has stopped: the signal takes effect
        thread by thread after kill() returns, and a thread still running then could answer one more
        request after the pause was recorded."""
        self._check_node(node)
        if not self._signal(node, signal.SIGSTOP):
            return
        pid = self._owned_pid(node)
        deadline = time.monotonic() + timeout
        while pid is not None and not procfs.all_threads_stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.002)

    def resume(self, node: str) -> None:
        self._check_node(node)
        self._signal(node, signal.SIGCONT)

    def start(self, node: str) -> None:
        self._check_node(node)
        if self._owned_pid(node) is None:
            self._spawn(node)

    def stop(self, node: str, timeout: float = 10.0) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after the timeout."""
        self._check_node(node)
        self._signal(node, signal.SIGCONT)
        self._signal(node, signal.SIGTERM)
        if not self._wait_gone(node, timeout):
            self.kill(node)

    def partition(self, groups: list[list[str]]) -> None:
        specs = self._node_specs()
        for g in groups:
            for n in g:
                self._check_node(n)
        netfilter.partition(self.slot, [[(n, specs[n]["host"]) for n in g] for g in groups])

    def cut(self, pairs: list[tuple[str, str]]) -> None:
        """Cut each pair of nodes, both directions (any graph: rings and bridges too)."""
        specs = self._node_specs()
        for a, b in pairs:
            self._check_node(a)
            self._check_node(b)
            netfilter.drop(self.slot, a, specs[b]["host"])
            netfilter.drop(self.slot, b, specs[a]["host"])

    def heal(self) -> None:
        netfilter.heal(self.slot)

    def logs(self, node: str, tail: int = 200) -> str:
        self._check_node(node)
        out = []
        for ext in ("log", "out"):   # NAME.out: what the service printed outside its logging (a crash)
            try:
                with open(os.path.join(self.dir, "logs", f"{node}.{ext}"), errors="replace") as f:
                    out.extend(f.readlines()[-tail:])
            except FileNotFoundError:
                pass
        return "".join(out[-tail:])
