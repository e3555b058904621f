"""Topic creation: the checks of a CreateTopics request and its ZooKeeper write (Kafka's
ZkAdminManager.createTopics and AdminZkClient.createTopicWithAssignment, for the ZooKeeper mode).

Guarantees: a topic that fails a check gets Kafka's error code and a message and writes nothing
(a manual replica assignment is checked by Kafka's rules, and used as given); a validate-only
request checks and writes nothing;
one that passes is written in a single ZooKeeper transaction (its config, its assignment, and each
partition's first leader and ISR) that also checks the controller epoch znode's version, so a
controller that is no longer active writes nothing.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.common import zk_paths
from eoslab.common.topics import new_topic_id, validate_configs, validate_topic_name
from services.controller import controller_events as ev
from services.controller.context import LeaderIsr, assign_replicas, check_fenced

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10000


@dataclass(frozen=True)
class TopicRefused:
    error: int
    message: str


def manual_assignment(t: broker_pb2.CreatableTopic, live: list[int]) -> TopicRefused | dict[int, list[int]] | None:
    """The topic's own replica assignment (None when it has none), or why it is refused: Kafka's
    AdminZkClient.validateTopicCreate rules, and KRaft's for a broker that is not registered."""
    if not t.assignments:
        return None
    assignment: dict[int, list[int]] = {}
    for a in t.assignments:
        reps = list(a.broker_ids)
        if a.partition in assignment:
            return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer "
                                                              f"sequence: partition {a.partition} twice")
        if not reps:
            return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT,
                                f"The manual partition assignment of partition {a.partition} is an empty replica list.")
        if len(set(reps)) != len(reps):
            return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT,
                                f"Duplicate replica assignment found: partition {a.partition}: {reps}")
        unknown = sorted(set(reps) - set(live))
        if unknown:
            return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker "
                                                              f"{unknown[0]}, but no such broker is registered.")
        assignment[a.partition] = reps
    if sorted(assignment) != list(range(len(assignment))):
        return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    if len({len(r) for r in assignment.values()}) != 1:
        return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    if len(assignment) > MAX_PARTITIONS:
        return TopicRefused(E.INVALID_PARTITIONS, f"partitions must be 1..{MAX_PARTITIONS}, got {len(assignment)}")
    return assignment


def check_new_topic(t: broker_pb2.CreatableTopic, existing, live: list[int],
                    default_rf: int) -> TopicRefused | int:
    """Why the topic cannot be created, or the replication factor it gets (its assignment's, else the
    request's, else the controller's default capped by the live brokers)."""
    if (msg := validate_topic_name(t.name)) is not None:
        return TopicRefused(E.INVALID_TOPIC_EXCEPTION, msg)
    if t.name in existing:
        return TopicRefused(E.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists")
    manual = manual_assignment(t, live)
    if isinstance(manual, TopicRefused):
        return manual
    if manual is not None:
        rf = len(manual[0])
    else:
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
                    states: dict[int, LeaderIsr], topic_id: str) -> list:
    """One ZooKeeper transaction creating the topic; kazoo's results, one per operation (the first is
    the controller-epoch check)."""
    tx = zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, epoch_zk_version)
    tx.create(zk_paths.topic_config_path(name), zk_paths.encode({"version": 1, "config": configs}))
    tx.create(zk_paths.topic_path(name), zk_paths.encode_topic(assignment, topic_id))
    tx.create(zk_paths.topic_path(name) + "/partitions", b"")
    for p, s in states.items():
        tx.create(f"{zk_paths.topic_path(name)}/partitions/{p}", b"")
        tx.create(zk_paths.partition_state_path(name, p), zk_paths.encode(s.to_json()))
    return tx.commit()


def create_topic(c, t: broker_pb2.CreatableTopic, validate_only: bool = False) -> broker_pb2.CreateTopicResult:
    """The active controller `c` (on its event thread) creates one topic: checks, one fenced ZooKeeper
    transaction, then leaders elected, brokers told, and the coordinators' assignment looked at again.
    With `validate_only` it stops after the checks and answers as the creation would."""
    def fail(code, msg):
        return broker_pb2.CreateTopicResult(name=t.name, error=code, error_message=msg)
    if not c.active:
        return fail(E.NOT_CONTROLLER, "this controller is not active")
    if any(t.name == n for owed in c.ctx.deleting.values() for n, _ in owed):
        return fail(E.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
    live = sorted(c.ctx.brokers)
    rf = check_new_topic(t, c.ctx.assignments, live, c.default_rf)
    if isinstance(rf, TopicRefused):
        return fail(rf.error, rf.message)
    configs = dict(t.configs)
    assignment = manual_assignment(t, live) or assign_replicas(live, t.num_partitions, rf, random.randrange(len(live)))
    if validate_only:
        return broker_pb2.CreateTopicResult(name=t.name, error=E.NONE, num_partitions=len(assignment),
                                            replication_factor=rf)
    states = {p: LeaderIsr(r[0], 0, list(r), c.epoch) for p, r in assignment.items()}
    topic_id = new_topic_id()
    results = check_fenced(write_new_topic(c.zk, c.epoch_zk_version, t.name, configs, assignment, states, topic_id))
    if any(isinstance(r, NodeExistsError) for r in results):
        return fail(E.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists")
    if any(isinstance(r, Exception) for r in results):
        return fail(E.UNKNOWN_SERVER_ERROR, f"zookeeper refused the topic: {results!r}")
    with c.lock:
        c.ctx.assignments[t.name] = assignment
        c.ctx.configs[t.name] = configs
        c.ctx.topic_ids[t.name] = topic_id
        for p, s in states.items():
            c.ctx.states[(t.name, p)] = s
    log.info("created topic %s: %d partitions, replication factor %d", t.name, len(assignment), rf)
    c.state_changed()
    c.events.put(ev.CoordinatorChange())
    return broker_pb2.CreateTopicResult(name=t.name, error=E.NONE, num_partitions=len(assignment),
                                        replication_factor=rf)
