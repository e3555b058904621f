"""Kafka's error codes (shared by clients and services): which are retriable, which need fresh
metadata, and the one table that says which are definite.

Guarantees: `DEFINITE` is the single source for turning a failed operation
into a history entry: a definite error means the operation did not take
effect (`fail`); any other error, a timeout or a lost connection means it may
have (`info`).
"""
from __future__ import annotations

from eoslab.v1 import common_pb2

E = common_pb2.ErrorCode


def name(code: int) -> str:
    try:
        return E.Name(code)
    except ValueError:
        return f"ERROR_{code}"


RETRIABLE = {
    E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION,
    E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT,
    E.NETWORK_EXCEPTION, E.CORRUPT_MESSAGE, E.COORDINATOR_LOAD_IN_PROGRESS,
    E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR, E.FENCED_LEADER_EPOCH,
    E.UNKNOWN_LEADER_EPOCH, E.CONCURRENT_TRANSACTIONS, E.NOT_CONTROLLER,
}

NEEDS_METADATA = {
    E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.NETWORK_EXCEPTION, E.KAFKA_STORAGE_ERROR,
    E.REQUEST_TIMED_OUT,
}

# Errors after which the operation certainly did not take effect. A produce that
# fails with one of these was not appended. Everything else (timeouts, lost
# connections, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, unknown
# server errors) is indefinite. OUT_OF_ORDER_SEQUENCE_NUMBER is indefinite too: a
# broker answers it to a retry of a batch it wrote but no longer caches (current
# Kafka, and `--duplicate-beyond-cache-error=OUT_OF_ORDER_SEQUENCE_NUMBER`), so the
# records "may or may not have been appended" (*Idempotent producers and sequence numbers*).
DEFINITE = {
    E.CORRUPT_MESSAGE, E.UNKNOWN_TOPIC_OR_PARTITION, E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE,
    E.INVALID_REQUIRED_ACKS, E.INVALID_RECORD, E.INVALID_REQUEST, E.INVALID_TOPIC_EXCEPTION,
    E.NOT_ENOUGH_REPLICAS, E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED,
    E.UNKNOWN_PRODUCER_ID, E.INVALID_TXN_STATE, E.INVALID_PRODUCER_ID_MAPPING, E.CONCURRENT_TRANSACTIONS,
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
    E.TOPIC_ALREADY_EXISTS, E.INVALID_PARTITIONS, E.INVALID_REPLICATION_FACTOR, E.INVALID_REPLICA_ASSIGNMENT,
    E.INVALID_CONFIG,
    E.FENCED_LEADER_EPOCH,
}


def is_definite(code: int) -> bool:
    return code in DEFINITE


class KafkaError(Exception):
    """An error with Kafka's code; `definite` tells whether the operation surely did not happen."""

    def __init__(self, code: int, message: str = ""):
        self.code = code
        self.message = message
        super().__init__(f"{name(code)}" + (f": {message}" if message else ""))

    @property
    def name(self) -> str:
        return name(self.code)

    @property
    def definite(self) -> bool:
        return is_definite(self.code)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE
