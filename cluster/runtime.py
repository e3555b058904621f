"""The runtime interface: how the lab starts, stops and breaks a cluster.

One small interface, as Jepsen's DB/nemesis split: every runtime (local
processes, Docker containers, Kubernetes pods) offers the same verbs on nodes
named by role and number ("zookeeper", "controller-1", "broker-2", ...).
Guarantees of every implementation: `up` returns only once every service
answers; `down` leaves no process, container or rule behind; `heal` removes
every network fault it applied; the same call on the same node is idempotent
(killing a dead node is not an error). Where a clock fault's control file
and a disk fault's filesystem live is the runtime's to say (`clock_control_file`,
`enable_clock`, `clock_enabled`, `lazy_disks`, `disk`): a runtime without them
raises Unsupported with one line.
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

    # -- what the clock and disk faults reach through the runtime (each runtime says where it lives) --
    def clock_enabled(self) -> bool:
        """Whether the services run with libfaketime preloaded (cluster.faketime)."""
        return False

    def enable_clock(self) -> None:
        """Before `up`: the services start with libfaketime preloaded."""
        raise Unsupported(f"clock faults need the local or the docker runtime, not {self.name}")

    def clock_control_file(self, node: str) -> str:
        """The host path of the node's libfaketime control file (its offset, "+N" seconds)."""
        raise Unsupported(f"clock faults need the local or the docker runtime, not {self.name}")

    def lazy_disks(self) -> bool:
        """Whether the brokers' and ZooKeeper's data directories are lazy filesystems (cluster.lazyfs)."""
        return False

    def disk(self, node: str):
        """The node's lazy filesystem (cluster.lazyfs.LazyFs), for the disk faults."""
        raise Unsupported(f"disk faults need the local or the docker runtime, not {self.name}")


class Unsupported(RuntimeError):
    """A fault this runtime cannot apply; the message is one line."""
