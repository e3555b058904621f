"""CoordinatorConfig: every setting of a transaction coordinator process, declared once.

Guarantees: the coordinator's flags, its `EOSLAB_<NAME>` environment variables,
the check of `eoslab run --set coordinator.x=y` and docs/configuration.md come
from `CoordinatorConfig.DEF` (Kafka's `TransactionStateManagerConfig` and
`TransactionLogConfig` names where Kafka has them); the housekeeping
intervals are Kafka's defaults (timed-out transactions every 10 s, expired
transactional ids every hour) unless a run sets them.
"""
from __future__ import annotations

from eoslab.common.config import BY_VERSION, REQUIRED, ConfigDef, ServiceConfig, kafka_version_key
from services.common import internal_topics as it


class CoordinatorConfig(ServiceConfig):
    DEF = (ConfigDef("txn_coordinator")
           .define_process("coordinator.id", "coordinator", "clients")
           .define("bootstrap", str, REQUIRED, "broker HOST:PORT[,HOST:PORT...] for __transaction_state",
                   kafka_name="", process=True)
           .define_zk_session()
           .define("transaction.state.partitions", int, it.DEFAULT_TRANSACTION_STATE_PARTITIONS,
                   "partitions of __transaction_state (Kafka: 50)", min=1,
                   kafka_name="transaction.state.log.num.partitions")
           .define("transaction.state.replication.factor", int, 3, "replication factor of __transaction_state",
                   min=1, kafka_name="transaction.state.log.replication.factor")
           .define("transaction.max.timeout.ms", int, 900000, "the longest transaction.timeout.ms a producer may ask",
                   min=1)
           .define("transactional.id.expiration.ms", int, 604800000,
                   "forget a transactional id idle this long (7 days)", min=1)
           .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000,
                   "how often transactions open past their timeout are looked for and aborted", min=1)
           .define("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000,
                   "how often transactional ids idle past transactional.id.expiration.ms are looked for", min=1)
           .define("transaction.check.interval.ms", int, None,
                   "the lab's shorthand: both intervals above at once (unset: each its own)", min=1,
                   kafka_name="")
           .define(**kafka_version_key())
           .define("epoch.bump.per.transaction", bool, BY_VERSION,
                   "KIP-890 part 2: bump the producer epoch at every commit and abort", kafka_name="")
           .define("init.with.producer.id", bool, BY_VERSION,
                   "KIP-360: InitProducerId may carry (producer id, epoch)", kafka_name="")
           .define("enable.fault.injection", bool, False, "serve the FaultInjector RPC (replay_end_txn, crash_after_prepare)",
                   kafka_name="")
           .define("kafka.listen", str, None, "HOST:PORT for Kafka's binary protocol (real Kafka clients); off if "
                   "unset", kafka_name="listeners", process=True)
           .define("kafka.advertise", str, None, "HOST:PORT Kafka clients use (default: kafka.listen)",
                   kafka_name="advertised.listeners", process=True))
