"""ControllerConfig: every setting of a controller process, declared once (Kafka's `KafkaConfig`).

Guarantees: the controller's flags, its `EOSLAB_<NAME>` environment variables,
the check of `eoslab run --set controller.x=y` and docs/configuration.md come
from `ControllerConfig.DEF`.
"""
from __future__ import annotations

from eoslab.common.config import BY_VERSION, ConfigDef, ServiceConfig, kafka_version_key


class ControllerConfig(ServiceConfig):
    DEF = (ConfigDef("controller")
           .define_process("controller.id", "controller", "brokers")
           .define_zk_session()
           .define(**kafka_version_key())
           .define("eligible.leader.replicas", bool, BY_VERSION,
                   "KIP-966: keep the replicas that leave an ISR below min.insync.replicas as eligible leaders and "
                   "drop a broker back from an unclean shutdown from every ISR and ELR (4.0+; Kafka 4.0 needs "
                   "eligible.leader.replicas.version=1, 4.1 has it on for new clusters)", kafka_name="")
           .define("min.insync.replicas", int, 1, "the cluster's default for topics that do not set it (the ELR "
                   "rule reads it; give the brokers the same)", min=1)
           .define("pid.block.size", int, 1000, "producer ids claimed per block (Kafka: 1000, ProducerIdManager)",
                   min=1, kafka_name="")
           .define("default.replication.factor", int, 3,
                   "used when a topic asks for none (capped by the live brokers; Kafka: 1)", min=1))
