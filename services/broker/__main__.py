"""`python -m services.broker`: one broker process, its settings from BrokerConfig (flags, then EOSLAB_* env)."""
import sys

from eoslab import kafka_version

from eoslab.v1 import common_pb2
from eoslab.common.config import ConfigError
from services.broker import consumer_group_assignors as consumer_assignors
from services.broker.authorizer import parse_super_users
from services.broker.config import BrokerConfig
from services.broker.kafka_server import KafkaServer
from services.broker.log_config import LogConfig
from eoslab.common import rpc


def log_config(a, v) -> LogConfig:
    """The partitions' defaults from the broker's settings `a` and its release's rules `v`."""
    return LogConfig(max_message_bytes=a.max_message_bytes, segment_bytes=a.segment_bytes,
                     default_compression_type=a.compression_type, compression_type=a.compression_type,
                     producer_state_batches=a.producer_state_batches,
                     duplicate_beyond_cache_error=common_pb2.ErrorCode.Value(a.duplicate_beyond_cache_error),
                     snapshot_interval_batches=a.snapshot_interval_batches,
                     replica_lag_time_max_ms=a.replica_lag_time_max_ms, min_insync_replicas=a.min_insync_replicas,
                     transaction_verification=a.transaction_verification, unknown_producer=a.unknown_producer,
                     txn_offset_commit_member_check=v.txn_offset_commit_member_check,
                     hw_needs_min_isr=v.hw_needs_min_isr,
                     producer_id_expiration_ms=a.producer_id_expiration_ms,
                     producer_id_expiration_check_ms=a.producer_id_expiration_check_interval_ms,
                     flush_messages=a.flush_messages, flush_ms=a.flush_ms, segment_ms=a.segment_ms,
                     delete_retention_ms=a.cleaner_delete_retention_ms,
                     min_compaction_lag_ms=a.cleaner_min_compaction_lag_ms,
                     max_compaction_lag_ms=a.cleaner_max_compaction_lag_ms,
                     min_cleanable_dirty_ratio=a.cleaner_min_cleanable_ratio,
                     file_delete_delay_ms=a.segment_delete_delay_ms,
                     flush_scheduler_interval_ms=a.flush_scheduler_interval_ms,
                     recovery_point_checkpoint_interval_ms=a.flush_offset_checkpoint_interval_ms)


def cleaner_settings(a) -> dict | None:
    """The log cleaner's settings, or None with log.cleaner.enable=false."""
    if not a.cleaner_enable:
        return None
    return {"backoff_ms": a.cleaner_backoff_ms, "dedupe_buffer_size": a.cleaner_dedupe_buffer_size}


def authorizer_settings(a) -> dict | None:
    """AclAuthorizer's settings, or None with no authorizer.class.name (Kafka's default)."""
    if not a.authorizer_class_name:
        return None
    return {"super_users": parse_super_users(a.super_users), "allow_if_no_acls": a.allow_everyone_if_no_acl_found}


def main(argv: list[str] | None = None) -> None:
    try:
        a = BrokerConfig.parse(sys.argv[1:] if argv is None else argv)
    except ConfigError as e:
        sys.exit(f"python -m services.broker: {e}")
    v = kafka_version.get(a.kafka_version)
    names = tuple(n.strip() for n in a.group_consumer_assignors.split(",") if n.strip())
    try:
        consumer_assignors.assignors(names)
    except ValueError as e:
        sys.exit(f"python -m services.broker: --group-consumer-assignors: {e}")
    consumer_groups = {"session_timeout_ms": a.group_consumer_session_timeout_ms,
                       "heartbeat_interval_ms": a.group_consumer_heartbeat_interval_ms, "assignors": names}
    group_config_bounds = {"session_bounds": (a.group_consumer_min_session_timeout_ms,
                                              a.group_consumer_max_session_timeout_ms),
                           "heartbeat_bounds": (a.group_consumer_min_heartbeat_interval_ms,
                                                a.group_consumer_max_heartbeat_interval_ms)}
    if a.broker_rack is not None:
        a.broker_rack = a.broker_rack.replace("{id}", str(a.broker_id))
    rpc.setup_logging(f"broker-{a.broker_id}")
    cfg = log_config(a, v)
    server = KafkaServer(a.broker_id, a.listen, a.advertise or a.listen, a.zookeeper, a.data_dir,
                          a.zk_session_timeout_ms, cfg, a.enable_fault_injection,
                          kafka_listen=a.kafka_listen, kafka_advertise=a.kafka_advertise,
                          auto_create_topics_enable=a.auto_create_topics_enable,
                          num_partitions=a.num_partitions, kafka_version=a.kafka_version,
                          txn_offset_commit_verification=v.txn_offset_commit_verification,
                          transactional_produce_needs_id=v.transactional_produce_needs_id,
                          consumer_groups=consumer_groups, authorizer=authorizer_settings(a),
                          group_config_bounds=group_config_bounds, rack=a.broker_rack,
                          replica_selector=a.replica_selector_class, log_cleaner=cleaner_settings(a))
    server.config = a           # DescribeConfigs of this broker lists these settings
    server.start()
    rpc.wait_for_termination()
    server.stop()


if __name__ == "__main__":
    main()
