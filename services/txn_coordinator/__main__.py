"""`python -m services.txn_coordinator`: one transaction coordinator process."""
import argparse
import os

from eoslab import kafka_version

from services.common import internal_topics as it
from eoslab.common import rpc
from services.txn_coordinator.server import TransactionCoordinatorServer


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.txn_coordinator")
    p.add_argument("--coordinator-id", type=int, required=True)
    p.add_argument("--listen", required=True, help="HOST:PORT to bind")
    p.add_argument("--advertise", help="HOST:PORT clients use (default: --listen)")
    p.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    p.add_argument("--bootstrap", required=True, help="broker HOST:PORT[,HOST:PORT...]")
    p.add_argument("--zk-session-timeout-ms", type=int, default=2000)
    p.add_argument("--transaction-state-partitions", type=int, default=it.DEFAULT_TRANSACTION_STATE_PARTITIONS)
    p.add_argument("--transaction-state-replication-factor", type=int, default=3)
    p.add_argument("--transaction-max-timeout-ms", type=int, default=900000)
    p.add_argument("--transactional-id-expiration-ms", type=int, default=604800000)
    p.add_argument("--transaction-check-interval-ms", type=int, default=500,
                   help="how often timed-out transactions and idle ids are looked for (Kafka: 10000 and 3600000)")
    p.add_argument("--kafka-version", default=os.environ.get("EOSLAB_KAFKA_VERSION") or kafka_version.DEFAULT,
                   choices=kafka_version.names(),
                   help="behave as this Kafka release (default: $EOSLAB_KAFKA_VERSION, else 4.0); "
                        "the switches below override it")
    p.add_argument("--epoch-bump-per-transaction", action=argparse.BooleanOptionalAction, default=None,
                   help="KIP-890 part 2: bump the producer epoch at every commit and abort (default: by version)")
    p.add_argument("--init-with-producer-id", action=argparse.BooleanOptionalAction, default=None,
                   help="KIP-360: InitProducerId may carry (producer id, epoch) (default: by version)")
    p.add_argument("--enable-fault-injection", action="store_true",
                   help="serve the FaultInjector RPC (replay_end_txn), as brokers do for lost ACKs")
    p.add_argument("--kafka-listen", help="HOST:PORT for Kafka's binary protocol (real Kafka clients); off if unset")
    p.add_argument("--kafka-advertise", help="HOST:PORT Kafka clients use (default: --kafka-listen)")
    a = p.parse_args()
    v = kafka_version.get(a.kafka_version)
    bump = v.epoch_bump_per_transaction if a.epoch_bump_per_transaction is None else a.epoch_bump_per_transaction
    kip360 = v.init_with_producer_id if a.init_with_producer_id is None else a.init_with_producer_id
    for name in ("transaction_state_partitions", "transaction_state_replication_factor",
                 "transaction_max_timeout_ms", "transactional_id_expiration_ms", "transaction_check_interval_ms"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if os.environ.get("EOSLAB_CHECK_ARGS"):   # cluster.service_args: the flags are good, start nothing
        return
    rpc.setup_logging(f"txn-coordinator-{a.coordinator_id}")
    server = TransactionCoordinatorServer(
        a.coordinator_id, a.listen, a.advertise or a.listen, a.zookeeper, a.bootstrap, a.zk_session_timeout_ms,
        a.transaction_state_partitions, a.transaction_state_replication_factor,
        max_timeout_ms=a.transaction_max_timeout_ms, expiration_ms=a.transactional_id_expiration_ms,
        check_interval_ms=a.transaction_check_interval_ms, epoch_bump_per_txn=bump,
        init_with_producer_id=kip360, kafka_listen=a.kafka_listen, kafka_advertise=a.kafka_advertise,
        enable_fault_injection=a.enable_fault_injection)
    server.start()
    rpc.wait_for_termination()
    server.stop()


if __name__ == "__main__":
    main()
