"""Admin: topic creation through the cluster, waiting until every partition has a leader.

Guarantees: `create_topic` returns only once metadata from the bootstrap
broker shows a leader for every partition; an existing topic with the same
partition count is not an error when `exist_ok`. Deadlines and back-offs
are seconds of the `Time` given (default: the metadata's clock).
"""
from __future__ import annotations

import grpc

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2

CREATE_RETRY_BACKOFF_S = 0.2     # NOT_CONTROLLER or a lost connection: CreateTopics is asked again
LEADER_POLL_S = 0.1              # how often a new topic's metadata is read until every partition has a leader


def create_topic(metadata: ClusterMetadata, name: str, partitions: int = 1, replication_factor: int = 0,
                 configs: dict[str, str] | None = None, exist_ok: bool = True, timeout: float = 30.0,
                 time: Time | None = None) -> None:
    clock = time or getattr(metadata, "time", SYSTEM)
    deadline = clock.monotonic() + timeout
    req = broker_pb2.CreateTopicsRequest(topics=[broker_pb2.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, configs=configs or {})])
    while True:
        try:
            r = metadata.stub(metadata.any_broker()).CreateTopics(req, timeout=10).topics[0]
        except grpc.RpcError as e:
            r = broker_pb2.CreateTopicResult(error=E.NETWORK_EXCEPTION, error_message=e.code().name)
        if r.error == E.NONE or (r.error == E.TOPIC_ALREADY_EXISTS and exist_ok):
            break
        if r.error not in (E.NOT_CONTROLLER, E.NETWORK_EXCEPTION) or clock.monotonic() > deadline:
            raise KafkaError(r.error, r.error_message)
        clock.sleep(CREATE_RETRY_BACKOFF_S)
    wait_for_leaders(metadata, name, deadline, clock)


def wait_for_leaders(metadata: ClusterMetadata, topic: str, deadline: float, time: Time | None = None) -> int:
    """Until every partition of `topic` has a leader; `deadline` is a monotonic() reading of `time`."""
    clock = time or getattr(metadata, "time", SYSTEM)
    while True:
        try:
            metadata.refresh([topic])
            n = metadata.partitions_for(topic)
            if n and all(metadata.leader(topic, p) for p in range(n)):
                return n
        except KafkaError:
            pass
        if clock.monotonic() > deadline:
            raise KafkaError(E.LEADER_NOT_AVAILABLE, f"topic {topic!r} has partitions without a leader")
        clock.sleep(LEADER_POLL_S)
