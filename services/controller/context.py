"""ControllerContext: the active controller's in-memory copy of cluster state.

Guarantees: it mirrors ZooKeeper (live brokers with their epochs, topic
assignments, partition states with their znode versions, topic configs) and
is only changed by the controller's event thread after the matching ZooKeeper
write succeeded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TOPIC_CONFIG_KEYS = {
    "max.message.bytes": int,
    "min.insync.replicas": int,
    "segment.bytes": int,
    "unclean.leader.election.enable": lambda v: {"true": True, "false": False}[v.lower()],
}
INT32_MAX = 2 ** 31 - 1
# Kafka's bounds (LogConfig: INT configs; segment.bytes at least 14 bytes, one legacy record's overhead).
TOPIC_CONFIG_RANGES = {
    "max.message.bytes": (1, INT32_MAX),
    "min.insync.replicas": (1, INT32_MAX),
    "segment.bytes": (14, INT32_MAX),
}


@dataclass
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    epoch: int  # czxid of the registration znode, as Kafka's broker epoch

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

    def to_json(self) -> dict:
        return {"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch,
                "isr": self.isr, "controller_epoch": self.controller_epoch}


@dataclass
class ControllerContext:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    states: dict[tuple[str, int], LeaderIsr] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)

    def replicas(self, topic: str, partition: int) -> list[int]:
        return self.assignments.get(topic, {}).get(partition, [])

    def unclean_allowed(self, topic: str) -> bool:
        return self.configs.get(topic, {}).get("unclean.leader.election.enable", "false").lower() == "true"

    def clear(self) -> None:
        self.brokers.clear()
        self.assignments.clear()
        self.states.clear()
        self.configs.clear()


def validate_topic_name(name: str) -> str | None:
    if not name or len(name) > 249:
        return "topic name must be 1 to 249 characters"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    bad = [c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))]
    if bad:
        return f"topic name {name!r} has illegal characters (allowed: a-z A-Z 0-9 . _ -)"
    return None


def validate_configs(configs: dict[str, str]) -> str | None:
    for k, v in configs.items():
        conv = TOPIC_CONFIG_KEYS.get(k)
        if conv is None:
            return f"unknown topic config {k!r}"
        try:
            val = conv(v)
        except (ValueError, KeyError):
            return f"invalid value {v!r} for {k}"
        low, high = TOPIC_CONFIG_RANGES.get(k, (None, None))
        if low is not None and not low <= val <= high:
            return f"{k} must be between {low} and {high}, got {v}"
    return None


def assign_replicas(brokers: list[int], partitions: int, rf: int, start: int) -> dict[int, list[int]]:
    """Round-robin assignment: partition p's replicas start at broker (start + p)."""
    n = len(brokers)
    return {p: [brokers[(start + p + j) % n] for j in range(rf)] for p in range(partitions)}
