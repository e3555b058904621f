"""`python -m services.txn_coordinator`: one transaction coordinator process; settings from CoordinatorConfig."""
import sys

from eoslab.common.config import ConfigError
from services.txn_coordinator.config import CoordinatorConfig
from eoslab.common import rpc
from services.txn_coordinator.server import TransactionCoordinatorServer


def main(argv: list[str] | None = None) -> None:
    try:
        a = CoordinatorConfig.parse(sys.argv[1:] if argv is None else argv)
    except ConfigError as e:
        sys.exit(f"python -m services.txn_coordinator: {e}")
    rpc.setup_logging(f"txn-coordinator-{a.coordinator_id}")
    server = TransactionCoordinatorServer(
        a.coordinator_id, a.listen, a.advertise or a.listen, a.zookeeper, a.bootstrap, a.zk_session_timeout_ms,
        a.transaction_state_partitions, a.transaction_state_replication_factor,
        max_timeout_ms=a.transaction_max_timeout_ms, expiration_ms=a.transactional_id_expiration_ms,
        abort_interval_ms=a.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        expiration_check_interval_ms=a.transaction_remove_expired_transaction_cleanup_interval_ms,
        check_interval_ms=a.transaction_check_interval_ms, epoch_bump_per_txn=a.epoch_bump_per_transaction,
        init_with_producer_id=a.init_with_producer_id, kafka_listen=a.kafka_listen, kafka_advertise=a.kafka_advertise,
        enable_fault_injection=a.enable_fault_injection, kafka_version=a.kafka_version)
    server.start()
    rpc.wait_for_termination()
    server.stop()


if __name__ == "__main__":
    main()
