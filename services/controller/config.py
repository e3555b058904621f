"""ControllerConfig: every setting of a controller process, declared once (Kafka's `KafkaConfig`).

Guarantees: the controller's flags, its `EOSLAB_<NAME>` environment variables,
the check of `eoslab run --set controller.x=y` and docs/configuration.md come
from `ControllerConfig.DEF`.
"""
from __future__ import annotations

from eoslab.common.config import ConfigDef, ServiceConfig


class ControllerConfig(ServiceConfig):
    DEF = (ConfigDef("controller")
           .define_process("controller.id", "controller", "brokers")
           .define_zk_session()
           .define("pid.block.size", int, 1000, "producer ids claimed per block (Kafka: 1000, ProducerIdManager)",
                   min=1, kafka_name="")
           .define("default.replication.factor", int, 3,
                   "used when a topic asks for none (capped by the live brokers; Kafka: 1)", min=1))
