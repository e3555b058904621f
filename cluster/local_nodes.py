"""The nodes of a local cluster: each one's role, id, loopback address and command line.

Guarantees: a function of the cluster's saved state and directory only, so every process that
loads the cluster (the one that started it, `eoslab cluster status`, a run) sees the same nodes at
the same addresses: ZooKeeper at the slot's .1, controllers at .11+, brokers at .21+ (gRPC and the
Kafka listener), transaction coordinators at .31+; each service gets the ZooKeeper session timeout
of the cluster and its role's extra flags last, so they override.
"""
from __future__ import annotations

import os

from cluster import slots

ZK_PORT, CONTROLLER_PORT, BROKER_PORT, TXN_COORDINATOR_PORT = 12181, 19093, 19092, 19094
KAFKA_PORT = 19192  # Kafka's binary protocol on every broker's and coordinator's own address


def zk_address(slot: int) -> str:
    return f"{slots.address(slot, 1)}:{ZK_PORT}"


def node_specs(state: dict, cluster_dir: str) -> dict[str, dict]:
    """name -> {"role", "id", "host", "port", "args" (python -m ... flags; not for ZooKeeper)}."""
    s = state["slot"]
    zk = zk_address(s)
    st = str(state["session_timeout_ms"])
    specs = {"zookeeper": {"role": "zookeeper", "id": None, "host": slots.address(s, 1), "port": ZK_PORT}}
    for i in range(1, state["controllers"] + 1):
        host = slots.address(s, 10 + i)
        specs[f"controller-{i}"] = {"role": "controller", "id": i, "host": host, "port": CONTROLLER_PORT,
                                    "args": ["-m", "services.controller", "--controller-id", str(i),
                                             "--listen", f"{host}:{CONTROLLER_PORT}", "--zookeeper", zk,
                                             "--zk-session-timeout-ms", st, *state["controller_args"]]}
    for i in range(1, state["brokers"] + 1):
        host = slots.address(s, 20 + i)
        data = os.path.join(cluster_dir, "data", f"broker-{i}")
        specs[f"broker-{i}"] = {"role": "broker", "id": i, "host": host, "port": BROKER_PORT,
                                "args": ["-m", "services.broker", "--broker-id", str(i),
                                         "--listen", f"{host}:{BROKER_PORT}", "--zookeeper", zk,
                                         "--data-dir", data, "--zk-session-timeout-ms", st,
                                         "--kafka-listen", f"{host}:{KAFKA_PORT}",
                                         "--enable-fault-injection", *state["broker_args"]]}
    bootstrap = ",".join(f"{slots.address(s, 20 + i)}:{BROKER_PORT}" for i in range(1, state["brokers"] + 1))
    for i in range(1, state.get("txn_coordinators", 0) + 1):
        host = slots.address(s, 30 + i)
        specs[f"txn-coordinator-{i}"] = {
            "role": "txn-coordinator", "id": i, "host": host, "port": TXN_COORDINATOR_PORT,
            "args": ["-m", "services.txn_coordinator", "--coordinator-id", str(i),
                     "--listen", f"{host}:{TXN_COORDINATOR_PORT}", "--zookeeper", zk, "--bootstrap", bootstrap,
                     "--kafka-listen", f"{host}:{KAFKA_PORT}", "--enable-fault-injection",
                     "--zk-session-timeout-ms", st, "--transaction-state-replication-factor",
                     str(min(3, state["brokers"])), *state.get("txn_coordinator_args", [])]}
    return specs
