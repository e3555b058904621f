"""BrokerConfig: every setting of a broker process, declared once (Kafka's `KafkaConfig`).

Guarantees: the broker's flags, its `EOSLAB_<NAME>` environment variables, the
check of `eoslab run --set broker.x=y` and docs/configuration.md come from
`BrokerConfig.DEF`; defaults are the lab's, with Kafka's default named in the
doc where the lab's differs (shorter timeouts for a lab on one machine).
"""
from __future__ import annotations

from eoslab.common import topic_configs
from eoslab.common.config import BY_VERSION, REQUIRED, ConfigDef, ServiceConfig, kafka_version_key
from services.broker.authorizer import AUTHORIZERS
from services.broker.log_config import FLUSH_NEVER
from services.broker.replica_selector import REPLICA_SELECTORS

DUP_CHOICES = ("DUPLICATE_SEQUENCE_NUMBER", "OUT_OF_ORDER_SEQUENCE_NUMBER")
UNKNOWN_CHOICES = ("OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "accept")


class BrokerConfig(ServiceConfig):
    DEF = (ConfigDef("broker")
           .define_process("broker.id", "broker", "clients")
           .define("data.dir", str, REQUIRED, "where the logs, checkpoints and snapshots live", kafka_name="log.dirs",
                   process=True)
           .define_zk_session()
           .define(**kafka_version_key())
           .define("producer.state.batches", int, BY_VERSION,
                   "batches remembered per producer per partition (Kafka 1.0+: 5; 0.11: 1)", min=1, kafka_name="")
           .define("duplicate.beyond.cache.error", str, BY_VERSION,
                   "answer to a retried batch older than that cache (0.11: DUPLICATE_SEQUENCE_NUMBER)",
                   choices=DUP_CHOICES, kafka_name="")
           .define("unknown.producer", str, BY_VERSION,
                   "a non-zero first sequence from a producer with no state (0.11: OUT_OF_ORDER_SEQUENCE_NUMBER; "
                   "1.0-2.4: UNKNOWN_PRODUCER_ID; 2.5+: accept, KIP-360)", choices=UNKNOWN_CHOICES, kafka_name="")
           .define("max.message.bytes", int, 1048588, "the largest batch a partition takes", min=1,
                   kafka_name="message.max.bytes")
           .define("compression.type", str, "producer", "the codec the partitions store batches with, unless "
                   "a topic's compression.type says otherwise: producer (as sent), uncompressed, gzip, snappy, lz4 "
                   "or zstd; a batch sent with another codec is recompressed", choices=topic_configs.COMPRESSION_TYPES)
           .define("segment.bytes", int, 16 * 1024 * 1024, "a log segment's size (Kafka: 1 GiB)", min=1,
                   kafka_name="log.segment.bytes")
           .define("segment.ms", int, 604800000, "roll a partition's active segment once its first and newest "
                   "batches are this far apart in time (record timestamps, else the segment's age); topic config "
                   "segment.ms overrides it", min=1, kafka_name="log.roll.ms")
           .define("cleaner.enable", bool, True, "run the log cleaner, which compacts the partitions of topics "
                   "with cleanup.policy=compact", kafka_name="log.cleaner.enable")
           .define("cleaner.backoff.ms", int, 15000, "how long the log cleaner waits when no log needs cleaning",
                   min=0, kafka_name="log.cleaner.backoff.ms")
           .define("cleaner.dedupe.buffer.size", int, 128 * 1024 * 1024, "memory for the log cleaner's map of "
                   "keys to their latest offsets (24 bytes a key, as Kafka counts); a round cleans as far as it "
                   "fits", min=1024, kafka_name="log.cleaner.dedupe.buffer.size")
           .define("cleaner.delete.retention.ms", int, 86400000, "how long a compacted topic keeps tombstones "
                   "and removable transaction markers after the cleaning round that first kept them (topic "
                   "config delete.retention.ms)", min=0, kafka_name="log.cleaner.delete.retention.ms")
           .define("cleaner.min.compaction.lag.ms", int, 0, "a record stays uncompacted at least this long "
                   "(topic config min.compaction.lag.ms)", min=0, kafka_name="log.cleaner.min.compaction.lag.ms")
           .define("cleaner.max.compaction.lag.ms", int, 2 ** 63 - 1, "a record is compacted within about this "
                   "long, whatever the dirty ratio (topic config max.compaction.lag.ms)", min=1,
                   kafka_name="log.cleaner.max.compaction.lag.ms")
           .define("cleaner.min.cleanable.ratio", float, 0.5, "clean a log once its uncleaned part is more than "
                   "this share of it (topic config min.cleanable.dirty.ratio)", min=0, max=1,
                   kafka_name="log.cleaner.min.cleanable.ratio")
           .define("segment.delete.delay.ms", int, 60000, "how long a segment the cleaner replaced stays on "
                   "disk, as a .deleted file, for readers still in it (topic config file.delete.delay.ms)", min=0,
                   kafka_name="log.segment.delete.delay.ms")
           .define("snapshot.interval.batches", int, 1000, "a producer-state snapshot every this many batches",
                   min=1, kafka_name="")
           .define("flush.messages", int, FLUSH_NEVER, "fsync a partition's log once this many messages are "
                   "unflushed (topic config flush.messages overrides it; Kafka's default never syncs by count)",
                   min=1, kafka_name="log.flush.interval.messages")
           .define("flush.ms", int, FLUSH_NEVER, "fsync a partition's log once its oldest unflushed message is "
                   "this old, checked every flush.scheduler.interval.ms (topic config flush.ms overrides it)",
                   min=0, kafka_name="log.flush.interval.ms")
           .define("flush.scheduler.interval.ms", int, FLUSH_NEVER,
                   "how often the log flusher checks flush.ms (Kafka's default: never)", min=1,
                   kafka_name="log.flush.scheduler.interval.ms")
           .define("flush.offset.checkpoint.interval.ms", int, 60000,
                   "how often each partition's recovery point is checkpointed", min=1,
                   kafka_name="log.flush.offset.checkpoint.interval.ms")
           .define("replica.lag.time.max.ms", int, 3000,
                   "a follower not caught up for this long leaves the ISR (Kafka: 30000)", min=1)
           .define("min.insync.replicas", int, 1, "default for topics that do not set it", min=1)
           .define("transaction.verification", bool, BY_VERSION,
                   "KIP-890 part 1: verify with the transaction coordinator before a transaction's first batch "
                   "on a partition (3.6+)", kafka_name="transaction.partition.verification.enable")
           .define("producer.id.expiration.ms", int, 86400000,
                   "forget a producer idle this long without an open transaction", min=1)
           .define("producer.id.expiration.check.interval.ms", int, 600000, "how often idle producers are looked for",
                   min=1)
           .define("auto.create.topics.enable", bool, True,
                   "a Kafka Metadata request naming an unknown topic creates it (num.partitions partitions, the "
                   "controller's default replication factor)")
           .define("num.partitions", int, 1, "partitions of a topic created without a count: auto-created, or "
                   "by CreateTopics with -1", min=1)
           .define("group.consumer.session.timeout.ms", int, 10000,
                   "a consumer-protocol (KIP-848) member not heard from for this long is fenced (Kafka: 45000)",
                   min=1)
           .define("group.consumer.heartbeat.interval.ms", int, 1000,
                   "the heartbeat interval told to consumer-protocol members (Kafka: 5000)", min=1)
           .define("group.consumer.min.session.timeout.ms", int, 2000,
                   "the smallest consumer.session.timeout.ms a group may set (Kafka: 45000)", min=1)
           .define("group.consumer.max.session.timeout.ms", int, 60000,
                   "the largest consumer.session.timeout.ms a group may set", min=1)
           .define("group.consumer.min.heartbeat.interval.ms", int, 500,
                   "the smallest consumer.heartbeat.interval.ms a group may set (Kafka: 5000)", min=1)
           .define("group.consumer.max.heartbeat.interval.ms", int, 15000,
                   "the largest consumer.heartbeat.interval.ms a group may set", min=1)
           .define("group.consumer.assignors", str, "uniform,range",
                   "the server-side assignors of consumer-protocol groups, comma-separated (uniform, range); the "
                   "first is used when members ask for none")
           .define("authorizer.class.name", str, "",
                   "the authorizer of Kafka requests: unset, none (every request allowed, the ACL requests "
                   "answered SECURITY_DISABLED); kafka.security.authorizer.AclAuthorizer or "
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer, ACLs kept in ZooKeeper",
                   choices=AUTHORIZERS)
           .define("super.users", str, "", "principals every operation is allowed, separated by ';' "
                   "(User:ANONYMOUS is every Kafka client of the lab's PLAINTEXT listener)")
           .define("allow.everyone.if.no.acl.found", bool, False,
                   "with an authorizer: a resource with no ACL is open to everyone")
           .define("broker.rack", str, None, "this broker's rack (KIP-36; KIP-392's rack-aware fetching); "
                   "`{id}` in it stands for broker.id, so that one setting gives each broker its own (RACK{id})")
           .define("replica.selector.class", str, "",
                   "KIP-392: how a partition leader picks the replica a consumer should fetch from; unset (always "
                   "the leader) or org.apache.kafka.common.replica.RackAwareReplicaSelector (a replica in the "
                   "consumer's client.rack)", choices=REPLICA_SELECTORS)
           .define("enable.fault.injection", bool, False, "serve the FaultInjector RPC (lost ACKs)", kafka_name="")
           .define("kafka.listen", str, None, "HOST:PORT for Kafka's binary protocol (real Kafka clients); off if "
                   "unset", kafka_name="listeners", process=True)
           .define("kafka.advertise", str, None, "HOST:PORT Kafka clients use (default: kafka.listen)",
                   kafka_name="advertised.listeners", process=True))
