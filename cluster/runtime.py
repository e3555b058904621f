"""The runtime interface: how the lab starts, stops and breaks a cluster.

One small interface, as Jepsen's DB/nemesis split: every runtime (local
processes, Docker containers, Kubernetes pods) offers the same verbs on nodes
named by role and number ("zookeeper", "controller-1", "broker-2", ...).
Guarantees of every implementation: `up` returns only once every service
answers; `down` leaves no process, container or rule behind; `heal` removes
every network fault it applied; the same call on the same node is idempotent
(killing a dead node is not an error).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field


@dataclass
class NodeInfo:
    name: str            # "broker-1", "controller-2", "zookeeper"
    role: str            # "broker" | "controller" | "zookeeper" | "txn-coordinator"
    node_id: int | None  # broker / controller id; None for ZooKeeper
    host: str            # address clients use
    port: int
    state: str = "unknown"   # "running" | "paused" | "dead" | "unknown"
    pid: int | None = None   # OS pid where there is one

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterInfo:
    name: str
    runtime: str
    bootstrap: str                      # host:port of a broker
    zookeeper: str                      # host:port
    nodes: list[NodeInfo] = field(default_factory=list)
    kafka_bootstrap: str = ""           # host:port,... of the brokers' Kafka listeners (real Kafka clients)

    def node(self, name: str) -> NodeInfo:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r} in cluster {self.name!r}")

    def by_role(self, role: str) -> list[NodeInfo]:
        return [n for n in self.nodes if n.role == role]

    def to_dict(self) -> dict:
        return {"name": self.name, "runtime": self.runtime, "bootstrap": self.bootstrap,
                "kafka_bootstrap": self.kafka_bootstrap,
                "zookeeper": self.zookeeper,
                "nodes": [dict(vars(n), address=n.address) for n in self.nodes]}


class Runtime(abc.ABC):
    """Start, stop and break one cluster."""

    name: str  # "local" | "docker" | "k8s"

    @abc.abstractmethod
    def up(self) -> ClusterInfo: ...

    @abc.abstractmethod
    def down(self) -> None: ...

    @abc.abstractmethod
    def info(self) -> ClusterInfo: ...

    @abc.abstractmethod
    def kill(self, node: str) -> None:
        """SIGKILL (or the runtime's equivalent): no clean shutdown."""

    @abc.abstractmethod
    def pause(self, node: str) -> None:
        """Freeze the node (SIGSTOP, cgroup freezer)."""

    @abc.abstractmethod
    def resume(self, node: str) -> None: ...

    @abc.abstractmethod
    def start(self, node: str) -> None:
        """Start a stopped or killed node with its data kept."""

    def restart(self, node: str) -> None:
        self.kill(node)
        self.start(node)

    @abc.abstractmethod
    def partition(self, groups: list[list[str]]) -> None:
        """Cut traffic between nodes of different groups (both directions)."""

    @abc.abstractmethod
    def heal(self) -> None:
        """Remove every network fault this runtime applied."""

    @abc.abstractmethod
    def logs(self, node: str, tail: int = 200) -> str: ...
