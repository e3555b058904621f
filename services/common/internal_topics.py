"""The internal topics and how keys map to their partitions.

Guarantees: every process (brokers, transaction coordinators, controller,
clients) maps a transactional.id or a group id to the same partition: CRC-32
of the UTF-8 key modulo the topic's partition count (Kafka uses the Java
hashCode; any stable hash will do, Python's hash() is salted per process).
"""
import zlib

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_TRANSACTION_STATE_PARTITIONS = 4   # Kafka: transaction.state.log.num.partitions = 50
DEFAULT_OFFSETS_PARTITIONS = 4             # Kafka: offsets.topic.num.partitions = 50
INTERNAL_TOPIC_CONFIGS = {"min.insync.replicas": "2"}


def partition_for(key: str, num_partitions: int) -> int:
    return zlib.crc32(key.encode()) % num_partitions
