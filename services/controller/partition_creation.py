"""More partitions for an existing topic: the checks of a CreatePartitions request and its ZooKeeper
write (Kafka's ZkAdminManager.createPartitions and AdminZkClient.addPartitions, ZooKeeper mode).

Guarantees: a topic that fails a check gets Kafka's error and message and writes nothing: an unknown
topic UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one INVALID_PARTITIONS; a replica
assignment of the wrong length, with duplicates, naming an unknown broker or of another replication
factor than the topic's INVALID_REPLICA_ASSIGNMENT; more replicas than live brokers
INVALID_REPLICATION_FACTOR. The lab's internal topics keep their partition counts (their partitioning
fixes which coordinator owns a group or transactional id) and are refused with INVALID_REQUEST. A
topic that passes is written in one ZooKeeper transaction fenced by the controller epoch: the
topic's full assignment and each new partition's first leader and ISR (the first replica; all of
them), so the old partitions are untouched.
"""
from __future__ import annotations

import logging

from eoslab.common import auth
from eoslab.common.errors import E
from eoslab.v1 import controller_pb2
from services.common import zk_paths
from services.controller.context import LeaderIsr, assign_replicas, check_fenced
from services.controller.topic_creation import MAX_PARTITIONS, TopicRefused

log = logging.getLogger(__name__)


def new_assignment(t, existing: dict[int, list[int]] | None, live: list[int]) -> TopicRefused | dict[int, list[int]]:
    """Why the topic cannot grow to t.count partitions, or the replicas of each new partition."""
    if existing is None:
        return TopicRefused(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
    if t.name in auth.INTERNAL_TOPICS:
        return TopicRefused(E.INVALID_REQUEST, f"the partition count of {t.name} is fixed in the lab")
    old = len(existing)
    if t.count < old:
        return TopicRefused(E.INVALID_PARTITIONS,
                            f"Topic currently has {old} partitions, which is higher than the requested {t.count}.")
    if t.count == old:
        return TopicRefused(E.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    if t.count > MAX_PARTITIONS:
        return TopicRefused(E.INVALID_PARTITIONS, f"partitions must be at most {MAX_PARTITIONS}, got {t.count}")
    rf = len(existing[min(existing)])
    if t.has_assignments:
        given = [list(a.broker_ids) for a in t.assignments]
        if len(given) != t.count - old:
            return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by "
                                f"{t.count - old} but {len(given)} assignments provided.")
        for replicas in given:
            if len(set(replicas)) != len(replicas):
                return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in {replicas}.")
            if len(replicas) != rf:
                return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, f"Inconsistent replication factor between "
                                    f"partitions, partition 0 has {rf} while {replicas} has {len(replicas)}.")
            if unknown := sorted(set(replicas) - set(live)):
                return TopicRefused(E.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: "
                                    f"{', '.join(map(str, unknown))}.")
        return {old + i: r for i, r in enumerate(given)}
    if rf > len(live):
        return TopicRefused(E.INVALID_REPLICATION_FACTOR,
                            f"replication factor {rf} exceeds the {len(live)} live brokers")
    first = existing[min(existing)][0]
    start = live.index(first) if first in live else 0      # Kafka starts from partition 0's first replica
    full = assign_replicas(live, t.count, rf, start)
    return {p: full[p] for p in range(old, t.count)}


def write_new_partitions(zk, epoch_zk_version: int, name: str, assignment: dict[int, list[int]],
                         states: dict[int, LeaderIsr], topic_id: str) -> list:
    """One ZooKeeper transaction: the topic's whole assignment (`assignment`, old and new partitions)
    and the new partitions' znodes; kazoo's results, the first being the controller-epoch check."""
    tx = zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, epoch_zk_version)
    tx.set_data(zk_paths.topic_path(name), zk_paths.encode_topic(assignment, topic_id))
    for p, s in states.items():
        tx.create(f"{zk_paths.topic_path(name)}/partitions/{p}", b"")
        tx.create(zk_paths.partition_state_path(name, p), zk_paths.encode(s.to_json()))
    return tx.commit()


def grow_topic(c, t, validate_only: bool) -> controller_pb2.CreatePartitionsResult:
    """The active controller `c` (on its event thread) adds the partitions one topic asks for."""
    def fail(code, msg):
        return controller_pb2.CreatePartitionsResult(name=t.name, error=code, error_message=msg)
    if not c.active:
        return fail(E.NOT_CONTROLLER, "this controller is not active")
    existing = c.ctx.assignments.get(t.name)
    added = new_assignment(t, dict(existing) if existing is not None else None, sorted(c.ctx.brokers))
    if isinstance(added, TopicRefused):
        return fail(added.error, added.message)
    if validate_only:
        return controller_pb2.CreatePartitionsResult(name=t.name, error=E.NONE)
    states = {p: LeaderIsr(r[0], 0, list(r), c.epoch) for p, r in added.items()}
    full = {**existing, **added}
    results = check_fenced(write_new_partitions(c.zk, c.epoch_zk_version, t.name, full, states, c.ctx.topic_ids[t.name]))
    if any(isinstance(r, Exception) for r in results):
        return fail(E.UNKNOWN_SERVER_ERROR, f"zookeeper refused the partitions: {results!r}")
    with c.lock:
        c.ctx.assignments[t.name] = full
        for p, s in states.items():
            c.ctx.states[(t.name, p)] = s
    log.info("topic %s: partitions %d..%d added", t.name, min(added), max(added))
    c.state_changed()
    return controller_pb2.CreatePartitionsResult(name=t.name, error=E.NONE)
