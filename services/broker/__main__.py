"""`python -m services.broker`: one broker process."""
import argparse

from eoslab.v1 import common_pb2
from services.broker.kafka_server import KafkaServer
from services.broker.partition import LogConfig
from services.common import rpc

DUP_CHOICES = ("DUPLICATE_SEQUENCE_NUMBER", "OUT_OF_ORDER_SEQUENCE_NUMBER")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.broker")
    p.add_argument("--broker-id", type=int, required=True)
    p.add_argument("--listen", required=True, help="HOST:PORT to bind")
    p.add_argument("--advertise", help="HOST:PORT clients use (default: --listen)")
    p.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--zk-session-timeout-ms", type=int, default=2000)
    p.add_argument("--producer-state-batches", type=int, default=5,
                   help="batches remembered per producer per partition (Kafka: 5)")
    p.add_argument("--duplicate-beyond-cache-error", choices=DUP_CHOICES, default=DUP_CHOICES[0],
                   help="answer to a retried batch older than the cache (KIP-98: DUPLICATE_SEQUENCE_NUMBER; "
                        "modern Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER)")
    p.add_argument("--max-message-bytes", type=int, default=1048588)
    p.add_argument("--segment-bytes", type=int, default=16 * 1024 * 1024)
    p.add_argument("--snapshot-interval-batches", type=int, default=1000)
    p.add_argument("--replica-lag-time-max-ms", type=int, default=3000,
                   help="a follower not caught up for this long leaves the ISR")
    p.add_argument("--min-insync-replicas", type=int, default=1, help="default for topics that do not set it")
    p.add_argument("--transaction-verification", action="store_true",
                   help="KIP-890 part 1: verify with the transaction coordinator before a transaction's "
                        "first batch on a partition")
    p.add_argument("--enable-fault-injection", action="store_true")
    a = p.parse_args()
    for name in ("producer_state_batches", "max_message_bytes", "segment_bytes", "snapshot_interval_batches",
                 "replica_lag_time_max_ms", "min_insync_replicas"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    rpc.setup_logging(f"broker-{a.broker_id}")
    cfg = LogConfig(max_message_bytes=a.max_message_bytes, segment_bytes=a.segment_bytes,
                    producer_state_batches=a.producer_state_batches,
                    duplicate_beyond_cache_error=common_pb2.ErrorCode.Value(a.duplicate_beyond_cache_error),
                    snapshot_interval_batches=a.snapshot_interval_batches,
                    replica_lag_time_max_ms=a.replica_lag_time_max_ms, min_insync_replicas=a.min_insync_replicas,
                    transaction_verification=a.transaction_verification)
    server = KafkaServer(a.broker_id, a.listen, a.advertise or a.listen, a.zookeeper, a.data_dir,
                         a.zk_session_timeout_ms, cfg, a.enable_fault_injection)
    server.start()
    rpc.wait_for_termination()
    server.stop()


if __name__ == "__main__":
    main()
