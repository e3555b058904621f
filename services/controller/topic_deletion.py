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
owed is also in ZooKeeper, `/admin/delete_topics/<topic>` (Kafka's path) holding the topic's replica
assignment, written in the deletion's transaction and removed once every replica took its
StopReplica; a controller that becomes active owes them again, so a controller failover loses none.
"""
from __future__ import annotations

import logging

from kazoo.exceptions import KazooException, NoNodeError

from eoslab.common import auth
from eoslab.common.errors import E
from eoslab.v1 import controller_pb2
from services.common import zk_paths
from services.controller.context import check_fenced

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
    owed = zk_paths.encode({"version": 1, "replicas": {str(p): r for p, r in sorted(assignment.items())}})
    if c.zk.exists(zk_paths.delete_topic_path(name)):        # a marker left by an earlier deletion
        tx.set_data(zk_paths.delete_topic_path(name), owed)
    else:
        tx.create(zk_paths.delete_topic_path(name), owed)
    results = check_fenced(tx.commit())
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
    """A broker took a StopReplica with delete_partitions for these partitions: nothing more is owed;
    a topic none of whose replicas is still owed leaves /admin/delete_topics."""
    topics = {tp.topic for tp in partitions}
    with c.lock:
        owed = c.ctx.deleting.get(broker_id)
        if owed is None:
            return
        owed.difference_update((tp.topic, tp.partition) for tp in partitions)
        if not owed:
            del c.ctx.deleting[broker_id]
        done = {t for t in topics if not any(n == t for o in c.ctx.deleting.values() for n, _ in o)}
    for t in done:
        try:
            c.zk.delete(zk_paths.delete_topic_path(t))
        except NoNodeError:
            pass
        except KazooException as e:      # kept: the next active controller owes it again, harmlessly
            log.info("could not remove %s: %r", zk_paths.delete_topic_path(t), e)


def load_owed_deletions(c) -> None:
    """On becoming active (under c.lock): every replica of a topic in /admin/delete_topics is owed its
    StopReplica again (a broker that has no such partition answers it all the same)."""
    for name in c.zk.get_children(zk_paths.DELETE_TOPICS):
        try:
            data, _ = c.zk.get(zk_paths.delete_topic_path(name))
        except NoNodeError:
            continue
        for p, replicas in zk_paths.decode(data).get("replicas", {}).items():
            for b in replicas:
                c.ctx.deleting.setdefault(b, set()).add((name, int(p)))
