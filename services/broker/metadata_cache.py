"""MetadataCache: the broker's copy of the cluster as the controller last described it.

Guarantees: updated only by UpdateMetadata from a controller whose epoch is
not older than the newest this broker has seen; answers Metadata requests
from that copy alone.
"""
from __future__ import annotations

import threading

from eoslab.v1 import broker_pb2, common_pb2
from eoslab.common.errors import E



class MetadataCache:
    def __init__(self):
        self.lock = threading.Lock()
        self.updated = threading.Condition(self.lock)    # notified on every update
        self.brokers: dict[int, common_pb2.BrokerEndpoint] = {}
        self.partitions: dict[str, dict[int, broker_pb2.PartitionState]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.topic_ids: dict[str, str] = {}
        self.controller_id = -1

    def update(self, req: broker_pb2.UpdateMetadataRequest) -> set[str]:
        """Take the controller's view; answers the topics whose configs changed or are new to this cache
        (a partition made before its topic's configs arrived takes them then), not those gone."""
        parts: dict[str, dict[int, broker_pb2.PartitionState]] = {}
        for s in req.partition_states:
            parts.setdefault(s.topic, {})[s.partition] = s
        with self.lock:
            self.brokers = {b.broker_id: b for b in req.live_brokers}
            self.partitions = parts
            configs = {c.topic: dict(c.configs) for c in req.topic_configs}
            changed = {t for t, c in configs.items() if self.configs.get(t) != c}
            self.configs = configs
            self.topic_ids = dict(req.topic_ids)
            self.controller_id = req.controller_id
            self.updated.notify_all()
        return changed

    def await_topics(self, names, present: bool, timeout_s: float) -> set[str]:
        """Wait until every topic of `names` is in this cache (present) or gone from it, at most
        timeout_s (Kafka's DelayedCreatePartitions / DelayedDeleteTopics); answers those still not so."""
        def pending():
            return {n for n in names if (n in self.partitions) != present}
        with self.lock:
            self.updated.wait_for(lambda: not pending(), timeout=max(0.0, timeout_s))
            return pending()

    def broker_address(self, broker_id: int) -> str | None:
        with self.lock:
            b = self.brokers.get(broker_id)
            return f"{b.host}:{b.port}" if b is not None else None

    def rack(self, broker_id: int) -> str | None:
        """The broker's broker.rack, None when it has none or this cache does not know it."""
        with self.lock:
            b = self.brokers.get(broker_id)
            return (b.rack or None) if b is not None else None

    def has_topic(self, topic: str) -> bool:
        with self.lock:
            return topic in self.partitions

    def has_partition(self, topic: str, partition: int) -> bool:
        with self.lock:
            return partition in self.partitions.get(topic, {})

    def topic_name(self, topic_id: str) -> str | None:
        """The topic with this id (Kafka's Uuid string), if this cache knows it."""
        with self.lock:
            return next((t for t, i in self.topic_ids.items() if i == topic_id), None)

    def topic_configs(self, topic: str) -> dict[str, str]:
        with self.lock:
            return dict(self.configs.get(topic, {}))

    def metadata(self, topics: list[str]) -> broker_pb2.MetadataResponse:
        with self.lock:
            resp = broker_pb2.MetadataResponse(controller_id=self.controller_id,
                                               brokers=list(self.brokers.values()))
            for name in (topics or sorted(self.partitions)):
                parts = self.partitions.get(name)
                if parts is None:
                    resp.topics.add(name=name, error=E.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                tm = resp.topics.add(name=name, error=E.NONE, topic_id=self.topic_ids.get(name, ""))
                for p in sorted(parts):
                    s = parts[p]
                    err = E.NONE if s.leader in self.brokers else E.LEADER_NOT_AVAILABLE
                    tm.partitions.add(error=err, partition=p, leader=s.leader if err == E.NONE else -1,
                                      leader_epoch=s.leader_epoch, replicas=s.replicas, isr=s.isr)
            return resp
