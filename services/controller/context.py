"""ControllerContext: the active controller's in-memory copy of cluster state.

Guarantees: it mirrors ZooKeeper (live brokers with their epochs, topic
assignments, partition states with their znode versions, topic configs) and
is only changed by the controller's event thread after the matching ZooKeeper
write succeeded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

class Fenced(Exception):
    """Our controller epoch is no longer current (a ZooKeeper write fenced by a newer controller)."""


def check_fenced(results: list) -> list:
    """kazoo's results of a transaction whose first operation checks the controller epoch's znode
    version: raises Fenced when that check failed (a newer controller is active), else the results."""
    from kazoo.exceptions import RolledBackError
    if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
        raise Fenced()
    return results


@dataclass
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    epoch: int  # czxid of the registration znode, as Kafka's broker epoch
    # the broker's previous process did not shut down cleanly (KRaft's registration with
    # PreviousBrokerEpoch -1): its unflushed tail may be gone
    unclean_shutdown: bool = False
    rack: str | None = None     # broker.rack, as its registration says

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class LeaderIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0
    # KIP-966: replicas that left an ISR below min.insync.replicas and may still lead, and the
    # last leader of a partition whose ISR and ELR emptied (Kafka's PartitionRecord fields)
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        d = {"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch,
             "isr": self.isr, "controller_epoch": self.controller_epoch}
        if self.elr:
            d["eligible_leader_replicas"] = self.elr
        if self.last_known_elr:
            d["last_known_elr"] = self.last_known_elr
        return d

    @classmethod
    def from_json(cls, d: dict, zk_version: int) -> "LeaderIsr":
        return cls(d["leader"], d["leader_epoch"], list(d["isr"]), d["controller_epoch"], zk_version,
                   list(d.get("eligible_leader_replicas", [])), list(d.get("last_known_elr", [])))


@dataclass
class ControllerContext:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    states: dict[tuple[str, int], LeaderIsr] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)     # Kafka's Uuid strings
    # broker -> partitions of deleted topics it still has to stop and delete (StopReplica)
    deleting: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    # the brokers' dynamic cluster default (/config/brokers/<default>): log defaults under the topics' own
    # configs, as a ZooKeeper-mode controller reads them from its broker's reconfigured KafkaConfig; not
    # cleared on resignation (it is not the controller's state but the cluster's config)
    cluster_defaults: dict[str, str] = field(default_factory=dict)

    def replicas(self, topic: str, partition: int) -> list[int]:
        return self.assignments.get(topic, {}).get(partition, [])

    def unclean_allowed(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable, else the cluster's dynamic default, else false."""
        own = self.configs.get(topic, {}).get("unclean.leader.election.enable")
        value = own if own is not None else self.cluster_defaults.get("unclean.leader.election.enable", "false")
        return value.strip().lower() == "true"

    def min_isr(self, topic: str, default: int) -> int:
        """The topic's min.insync.replicas, else the cluster's dynamic default, else `default` (static)."""
        for value in (self.configs.get(topic, {}).get("min.insync.replicas"),
                      self.cluster_defaults.get("min.insync.replicas")):
            if value is not None:
                try:
                    return int(value)
                except ValueError:
                    continue
        return default

    def clear(self) -> None:
        self.brokers.clear()
        self.assignments.clear()
        self.states.clear()
        self.configs.clear()
        self.topic_ids.clear()
        self.deleting.clear()


def assign_replicas(brokers: list[int], partitions: int, rf: int, start: int) -> dict[int, list[int]]:
    """Round-robin assignment: partition p's replicas start at broker (start + p)."""
    n = len(brokers)
    return {p: [brokers[(start + p + j) % n] for j in range(rf)] for p in range(partitions)}
