"""LogConfig: the per-partition settings a broker gives each of its partitions (Kafka's LogConfig).

Guarantees: one place for every log-level setting a Partition reads, with Kafka's defaults where
Kafka has the setting (max.message.bytes, producer.id.expiration.ms, flush.messages, flush.ms,
...); the broker's typed config (services/broker/config.py) fills it from its flags, a topic's
configs override it per partition (ReplicaManager._config_for, `apply_topic_configs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eoslab.common import compression, topic_configs
from eoslab.common.errors import E

CODEC_IDS = {"uncompressed": 0, "gzip": compression.GZIP, "snappy": compression.SNAPPY, "lz4": compression.LZ4,
             "zstd": compression.ZSTD}
FLUSH_NEVER = 2 ** 63 - 1    # Kafka's Long.MAX_VALUE: the flush.messages and flush.ms defaults


_CLEANER_TOPIC_CONFIGS = (("segment.ms", "segment_ms", int), ("delete.retention.ms", "delete_retention_ms", int),
                          ("min.compaction.lag.ms", "min_compaction_lag_ms", int),
                          ("max.compaction.lag.ms", "max_compaction_lag_ms", int),
                          ("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", float),
                          ("file.delete.delay.ms", "file_delete_delay_ms", int))


@dataclass
class LogConfig:
    max_message_bytes: int = 1048588           # Kafka's default max.message.bytes
    segment_bytes: int = 16 * 1024 * 1024
    producer_state_batches: int = 5            # batches remembered per producer
    duplicate_beyond_cache_error: int = E.DUPLICATE_SEQUENCE_NUMBER
    snapshot_interval_batches: int = 1000
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 3000
    # KIP-890 part 1: before the first transactional batch of a producer's
    # transaction, the leader asks the transaction coordinator whether this
    # partition was added to it (verify(transactional_id, pid, epoch, tp) -> error code)
    transaction_verification: bool = False
    # a non-zero first sequence from a producer with no state here: an error name or "accept" (KIP-360)
    unknown_producer: str = "accept"
    txn_offset_commit_member_check: bool = True   # KIP-447 (2.5)
    hw_needs_min_isr: bool = False                 # KIP-966 part 1 (3.9): no HW move while the ISR is under min
    producer_id_expiration_ms: int = 86400000      # Kafka's producer.id.expiration.ms (KIP-854)
    producer_id_expiration_check_ms: int = 600000  # Kafka's producer.id.expiration.check.interval.ms
    # durability (docs/durability.md): Kafka's defaults never fsync by count or by time
    flush_messages: int = FLUSH_NEVER              # flush.messages (log.flush.interval.messages)
    flush_ms: int = FLUSH_NEVER                    # flush.ms (log.flush.interval.ms, unset)
    flush_scheduler_interval_ms: int = FLUSH_NEVER  # log.flush.scheduler.interval.ms: how often flush.ms is checked
    recovery_point_checkpoint_interval_ms: int = 60000   # log.flush.offset.checkpoint.interval.ms
    compacted: bool = False                        # cleanup.policy has compact: records need keys
    # time-based rolling and the log cleaner (Kafka's defaults; the topic's configs override them)
    segment_ms: int = 604800000                    # segment.ms (log.roll.ms)
    delete_retention_ms: int = 86400000            # delete.retention.ms (log.cleaner.delete.retention.ms)
    min_compaction_lag_ms: int = 0                 # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2 ** 63 - 1       # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5         # min.cleanable.dirty.ratio (log.cleaner.min.cleanable.ratio)
    file_delete_delay_ms: int = 60000              # file.delete.delay.ms (log.segment.delete.delay.ms)
    log_append_time: bool = False                  # message.timestamp.type=LogAppendTime: the leader stamps
    default_timestamp_type: str = "CreateTime"     # the broker's log.message.timestamp.type (dynamic)
    default_compacted: bool = False                # the broker's log.cleanup.policy (dynamic) has compact
    compression_type: str = "producer"             # compression.type: the codec batches are stored with
    default_compression_type: str = "producer"     # the broker's compression.type (static, then dynamic)
    compression_levels: dict = field(default_factory=dict)   # codec id -> compression.<codec>.level set
    extra: dict = field(default_factory=dict)

    def apply_topic_configs(self, tc: dict) -> "LogConfig":
        """Override the log-level settings a topic sets (validated at creation: eoslab.common.topics)."""
        if "flush.messages" in tc:
            self.flush_messages = int(tc["flush.messages"])
        if "flush.ms" in tc:
            self.flush_ms = int(tc["flush.ms"])
        for name, attr, parse in _CLEANER_TOPIC_CONFIGS:
            if name in tc:
                setattr(self, attr, parse(tc[name]))
        self.compacted = topic_configs.is_compacted(tc) if "cleanup.policy" in tc else self.default_compacted
        self.log_append_time = tc.get("message.timestamp.type", self.default_timestamp_type) == "LogAppendTime"
        self.compression_type = tc.get("compression.type", self.default_compression_type)
        self.compression_levels = {codec: int(tc[f"compression.{name}.level"])
                                   for codec, name in compression.NAMES.items() if f"compression.{name}.level" in tc}
        return self

    def target_codec(self, source_codec: int) -> int:
        """The codec a batch sent with `source_codec` is stored with (Kafka's
        BrokerCompressionType.targetCompression): the producer's under `producer`, else the topic's."""
        return CODEC_IDS.get(self.compression_type, source_codec)     # "producer" (or unknown): as sent
