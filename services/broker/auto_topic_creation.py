"""Topics a broker creates for a client that names them (Kafka's AutoTopicCreationManager), and the
defaults CreateTopics fills in (KIP-464).

Guarantees: in a Metadata answer, a topic the broker does not know gets INVALID_TOPIC_EXCEPTION for an
illegal name (Kafka's Topic.validate); with auto-creation allowed (the request's flag and the broker's
auto.create.topics.enable) it is created through the controller with the broker's num.partitions and
the controller's default.replication.factor and answered LEADER_NOT_AVAILABLE (or the creation's
error); otherwise UNKNOWN_TOPIC_OR_PARTITION. Internal topics are never auto-created. CreateTopics'
-1 for partitions or replication factor means the broker's default; 0 or below -1 is refused with
INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR before anything reaches the controller.
"""
from __future__ import annotations

import logging

from eoslab.common import auth
from eoslab.common.errors import E
from eoslab.common.topics import validate_topic_name
from eoslab.v1 import broker_pb2

log = logging.getLogger(__name__)
DEFAULT_NUM_PARTITIONS = 1   # Kafka's num.partitions default


def unknown_topics(resp: broker_pb2.MetadataResponse, auto_create: bool, create_topics,
                   num_partitions: int = DEFAULT_NUM_PARTITIONS) -> None:
    """Set the answer of each topic `resp` does not know; `create_topics(CreateTopicsRequest)` is the
    broker's path to the controller."""
    unknown = [t for t in resp.topics if t.error == E.UNKNOWN_TOPIC_OR_PARTITION]
    create = []
    for t in unknown:
        if validate_topic_name(t.name) is not None:
            t.error = E.INVALID_TOPIC_EXCEPTION
        elif auto_create and t.name not in auth.INTERNAL_TOPICS:   # the lab creates those its own way
            create.append(t)
    if not create:
        return
    pb = broker_pb2.CreateTopicsRequest(topics=[broker_pb2.CreatableTopic(
        name=t.name, num_partitions=num_partitions, replication_factor=0) for t in create])
    results = {r.name: r for r in create_topics(pb).topics}
    for t in create:
        r = results.get(t.name)
        err = r.error if r is not None else E.UNKNOWN_SERVER_ERROR
        t.error = E.LEADER_NOT_AVAILABLE if err in (E.NONE, E.TOPIC_ALREADY_EXISTS) else err
        if r is not None and err not in (E.NONE, E.TOPIC_ALREADY_EXISTS):
            log.info("auto-creation of %s failed: %s", t.name, r.error_message)


def creatable(num_partitions: int, replication_factor: int, default_partitions: int) -> tuple[int, str, int, int]:
    """(error, message, partitions, replication factor) for a CreateTopics entry: -1 takes the default
    (the replication factor's is the controller's, sent as 0)."""
    if num_partitions == 0 or num_partitions < -1:
        return E.INVALID_PARTITIONS, "Number of partitions must be larger than 0, or -1 to use the default value.", \
            0, 0
    if replication_factor == 0 or replication_factor < -1:
        return E.INVALID_REPLICATION_FACTOR, \
            "Replication factor must be larger than 0, or -1 to use the default value.", 0, 0
    return E.NONE, "", default_partitions if num_partitions == -1 else num_partitions, max(0, replication_factor)
