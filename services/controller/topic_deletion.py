"""Topic deletion (Kafka's TopicDeletionManager and ZkAdminManager.deleteTopics, ZooKeeper mode, made
synchronous for ZooKeeper and Metadata).

Guarantees: the lab's internal topics are refused (INVALID_REQUEST: their partitions hold the
coordinators' state; Kafka 4.0 would delete them) and an unknown topic is UNKNOWN_TOPIC_OR_PARTITION;
otherwise the topic's znodes (each
partition's state, its partitions, the topic and its config) go in one ZooKeeper transaction fenced
by the controller epoch, then the controller forgets the topic, so the next UpdateMetadata leaves it
out on every broker. Each replica's broker is owed a StopReplica with delete_partitions
(`ControllerContext.deleting`), sent by its channel until the broker takes it: a broker that is down
gets it when it registers again, as Kafka retries a deletion that found a replica offline. What is
owed lives in the active controller's memory only: after a controller failover a replica that never
took its StopReplica keeps its files (docs/kafka-protocol.md, "Not served").
"""
from __future__ import annotations

import logging

from kazoo.exceptions import RolledBackError

from eoslab.common import auth
from eoslab.common.errors import E
from eoslab.v1 import controller_pb2
from services.common import zk_paths
from services.controller.context import Fenced

log = logging.getLogger(__name__)


def delete_topic(c, name: str) -> controller_pb2.DeleteTopicResult:
    """The active controller `c` (on its event thread) deletes one topic."""
    def fail(code, msg):
        return controller_pb2.DeleteTopicResult(name=name, error=code, error_message=msg)
    if not c.active:
        return fail(E.NOT_CONTROLLER, "this controller is not active")
    if name in auth.INTERNAL_TOPICS:
        return fail(E.INVALID_REQUEST, f"{name} holds the coordinators' state and cannot be deleted")
    assignment = c.ctx.assignments.get(name)
    if assignment is None:
        return fail(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    tx = c.zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, c.epoch_zk_version)
    for p in sorted(assignment):
        tx.delete(zk_paths.partition_state_path(name, p))
        tx.delete(f"{zk_paths.topic_path(name)}/partitions/{p}")
    tx.delete(zk_paths.topic_path(name) + "/partitions")
    tx.delete(zk_paths.topic_path(name))
    if c.zk.exists(zk_paths.topic_config_path(name)):
        tx.delete(zk_paths.topic_config_path(name))
    results = tx.commit()
    if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
        raise Fenced()
    if any(isinstance(r, Exception) for r in results):
        return fail(E.UNKNOWN_SERVER_ERROR, f"zookeeper refused the deletion: {results!r}")
    with c.lock:
        for p, replicas in assignment.items():
            c.ctx.states.pop((name, p), None)
            for b in replicas:
                c.ctx.deleting.setdefault(b, set()).add((name, p))
        c.ctx.assignments.pop(name, None)
        c.ctx.configs.pop(name, None)
        c.ctx.topic_ids.pop(name, None)
    log.info("deleted topic %s (%d partitions); its replicas are stopped and deleted as brokers answer",
             name, len(assignment))
    c.state_changed()
    return controller_pb2.DeleteTopicResult(name=name, error=E.NONE)


def replicas_stopped(c, broker_id: int, partitions) -> None:
    """A broker took a StopReplica with delete_partitions for these partitions: nothing more is owed."""
    with c.lock:
        owed = c.ctx.deleting.get(broker_id)
        if owed is None:
            return
        owed.difference_update((tp.topic, tp.partition) for tp in partitions)
        if not owed:
            del c.ctx.deleting[broker_id]
