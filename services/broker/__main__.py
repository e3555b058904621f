"""`python -m services.broker`: one broker process."""
import argparse
import os

from eoslab import kafka_version

from eoslab.v1 import common_pb2
from services.broker.kafka_server import KafkaServer
from services.broker.partition import LogConfig
from eoslab.common import rpc

DUP_CHOICES = ("DUPLICATE_SEQUENCE_NUMBER", "OUT_OF_ORDER_SEQUENCE_NUMBER")
UNKNOWN_CHOICES = ("OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "accept")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.broker")
    p.add_argument("--broker-id", type=int, required=True)
    p.add_argument("--listen", required=True, help="HOST:PORT to bind")
    p.add_argument("--advertise", help="HOST:PORT clients use (default: --listen)")
    p.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--zk-session-timeout-ms", type=int, default=2000)
    p.add_argument("--kafka-version", default=os.environ.get("EOSLAB_KAFKA_VERSION") or kafka_version.DEFAULT,
                   choices=kafka_version.names(),
                   help="behave as this Kafka release (default: $EOSLAB_KAFKA_VERSION, else 4.0); "
                        "the switches below override it")
    p.add_argument("--producer-state-batches", type=int, default=None,
                   help="batches remembered per producer per partition (default: by version; Kafka 1.0+: 5)")
    p.add_argument("--duplicate-beyond-cache-error", choices=DUP_CHOICES, default=None,
                   help="answer to a retried batch older than the cache (0.11: DUPLICATE_SEQUENCE_NUMBER; "
                        "1.0+: OUT_OF_ORDER_SEQUENCE_NUMBER; default: by version)")
    p.add_argument("--unknown-producer", choices=UNKNOWN_CHOICES, default=None,
                   help="a non-zero first sequence from a producer with no state (0.11: OUT_OF_ORDER_SEQUENCE_NUMBER; "
                        "1.0-2.4: UNKNOWN_PRODUCER_ID; 2.5+ accept, KIP-360; default: by version)")
    p.add_argument("--max-message-bytes", type=int, default=1048588)
    p.add_argument("--segment-bytes", type=int, default=16 * 1024 * 1024)
    p.add_argument("--snapshot-interval-batches", type=int, default=1000)
    p.add_argument("--replica-lag-time-max-ms", type=int, default=3000,
                   help="a follower not caught up for this long leaves the ISR")
    p.add_argument("--min-insync-replicas", type=int, default=1, help="default for topics that do not set it")
    p.add_argument("--transaction-verification", action=argparse.BooleanOptionalAction, default=None,
                   help="KIP-890 part 1: verify with the transaction coordinator before a transaction's "
                        "first batch on a partition (default: by version, 3.6+)")
    p.add_argument("--producer-id-expiration-ms", type=int, default=86400000,
                   help="forget a producer idle this long without an open transaction (Kafka: 1 day)")
    p.add_argument("--producer-id-expiration-check-interval-ms", type=int, default=600000,
                   help="how often idle producers are looked for (Kafka: 10 minutes)")
    p.add_argument("--enable-fault-injection", action="store_true")
    p.add_argument("--kafka-listen", help="HOST:PORT for Kafka's binary protocol (real Kafka clients); off if unset")
    p.add_argument("--kafka-advertise", help="HOST:PORT Kafka clients use (default: --kafka-listen)")
    a = p.parse_args()
    v = kafka_version.get(a.kafka_version)
    for name in ("producer_state_batches", "duplicate_beyond_cache_error", "unknown_producer",
                 "transaction_verification"):
        if getattr(a, name) is None:
            setattr(a, name, getattr(v, name))
    for name in ("producer_state_batches", "max_message_bytes", "segment_bytes", "snapshot_interval_batches",
                 "replica_lag_time_max_ms", "min_insync_replicas", "producer_id_expiration_ms",
                 "producer_id_expiration_check_interval_ms"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if os.environ.get("EOSLAB_CHECK_ARGS"):   # cluster.service_args: the flags are good, start nothing
        return
    rpc.setup_logging(f"broker-{a.broker_id}")
    cfg = LogConfig(max_message_bytes=a.max_message_bytes, segment_bytes=a.segment_bytes,
                    producer_state_batches=a.producer_state_batches,
                    duplicate_beyond_cache_error=common_pb2.ErrorCode.Value(a.duplicate_beyond_cache_error),
                    snapshot_interval_batches=a.snapshot_interval_batches,
                    replica_lag_time_max_ms=a.replica_lag_time_max_ms, min_insync_replicas=a.min_insync_replicas,
                    transaction_verification=a.transaction_verification, unknown_producer=a.unknown_producer,
                    txn_offset_commit_member_check=v.txn_offset_commit_member_check,
                    producer_id_expiration_ms=a.producer_id_expiration_ms,
                    producer_id_expiration_check_ms=a.producer_id_expiration_check_interval_ms)
    server = KafkaServer(a.broker_id, a.listen, a.advertise or a.listen, a.zookeeper, a.data_dir,
                         a.zk_session_timeout_ms, cfg, a.enable_fault_injection,
                         kafka_listen=a.kafka_listen, kafka_advertise=a.kafka_advertise)
    server.start()
    rpc.wait_for_termination()
    server.stop()


if __name__ == "__main__":
    main()
