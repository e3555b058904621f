"""ControllerConfig: every setting of a controller process, declared once (Kafka's `KafkaConfig`).

Guarantees: the controller's flags, its `EOSLAB_<NAME>` environment variables,
the check of `eoslab run --set controller.x=y` and docs/configuration.md come
from `ControllerConfig.DEF`.
"""
from __future__ import annotations

from eoslab.common.config import REQUIRED, ConfigDef, ServiceConfig


class ControllerConfig(ServiceConfig):
    DEF = (ConfigDef("controller")
           .define("controller.id", int, REQUIRED, "this controller's id", min=0, process=True)
           .define("listen", str, REQUIRED, "HOST:PORT the gRPC server binds", kafka_name="listeners", process=True)
           .define("advertise", str, None, "HOST:PORT brokers use (default: listen)",
                   kafka_name="advertised.listeners", process=True)
           .define("zookeeper", str, REQUIRED, "HOST:PORT[/chroot]", kafka_name="zookeeper.connect", process=True)
           .define("zk.session.timeout.ms", int, 2000, "ZooKeeper session timeout (Kafka: 18000)", min=1,
                   kafka_name="zookeeper.session.timeout.ms")
           .define("pid.block.size", int, 1000, "producer ids claimed per block (Kafka: 1000, ProducerIdManager)",
                   min=1, kafka_name="")
           .define("default.replication.factor", int, 3,
                   "used when a topic asks for none (capped by the live brokers; Kafka: 1)", min=1))
