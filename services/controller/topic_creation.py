"""Topic creation: the checks of a CreateTopics request and its ZooKeeper write (Kafka's
ZkAdminManager.createTopics and AdminZkClient.createTopicWithAssignment, for the ZooKeeper mode).

Guarantees: a topic that fails a check gets Kafka's error code and a message and writes nothing;
one that passes is written in a single ZooKeeper transaction (its config, its assignment, and each
partition's first leader and ISR) that also checks the controller epoch znode's version, so a
controller that is no longer active writes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.common import zk_paths
from eoslab.common.topics import validate_configs, validate_topic_name
from services.controller.context import LeaderIsr

MAX_PARTITIONS = 10000


@dataclass(frozen=True)
class TopicRefused:
    error: int
    message: str


def check_new_topic(t: broker_pb2.CreatableTopic, existing, live: list[int],
                    default_rf: int) -> TopicRefused | int:
    """Why the topic cannot be created, or the replication factor it gets (the request's, else the
    controller's default capped by the live brokers)."""
    if (msg := validate_topic_name(t.name)) is not None:
        return TopicRefused(E.INVALID_TOPIC_EXCEPTION, msg)
    if t.name in existing:
        return TopicRefused(E.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists")
    if not 0 < t.num_partitions <= MAX_PARTITIONS:
        return TopicRefused(E.INVALID_PARTITIONS,
                            f"partitions must be 1..{MAX_PARTITIONS}, got {t.num_partitions}")
    rf = t.replication_factor or min(default_rf, max(1, len(live)))
    if rf < 1:
        return TopicRefused(E.INVALID_REPLICATION_FACTOR, f"replication factor must be positive, got {rf}")
    if rf > len(live):
        return TopicRefused(E.INVALID_REPLICATION_FACTOR,
                            f"replication factor {rf} exceeds the {len(live)} live brokers")
    if (msg := validate_configs(dict(t.configs))) is not None:
        return TopicRefused(E.INVALID_CONFIG, msg)
    return rf


def write_new_topic(zk, epoch_zk_version: int, name: str, configs: dict, assignment: dict[int, list[int]],
                    states: dict[int, LeaderIsr]) -> list:
    """One ZooKeeper transaction creating the topic; kazoo's results, one per operation (the first is
    the controller-epoch check)."""
    tx = zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, epoch_zk_version)
    tx.create(zk_paths.topic_config_path(name), zk_paths.encode({"version": 1, "config": configs}))
    tx.create(zk_paths.topic_path(name), zk_paths.encode(
        {"version": 1, "partitions": {str(p): r for p, r in assignment.items()}}))
    tx.create(zk_paths.topic_path(name) + "/partitions", b"")
    for p, s in states.items():
        tx.create(f"{zk_paths.topic_path(name)}/partitions/{p}", b"")
        tx.create(zk_paths.partition_state_path(name, p), zk_paths.encode(s.to_json()))
    return tx.commit()
