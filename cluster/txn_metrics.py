"""KIP-664's transaction gauges of a running cluster, read from its brokers.

Guarantees: `transaction_metrics(info)` asks every running broker (a cluster member's call, with
a bounded timeout) for Kafka's ReplicaManager gauges PartitionsWithLateTransactionsCount and
MaxActiveTransactionDuration (ms, with the partition of that transaction) and returns them by node
name; a broker that does not answer is left out, never an error. `eoslab cluster status` shows
them and a transactional run records them in run.json at its end.
"""
from __future__ import annotations


def transaction_metrics(info, timeout_s: float = 3.0) -> dict[str, dict]:
    """KIP-664's gauges of every running broker that answers (Kafka's ReplicaManager
    PartitionsWithLateTransactionsCount, MaxActiveTransactionDuration in ms and the partition of that
    transaction), by node name."""
    import grpc

    from eoslab.common import rpc
    from eoslab.v1 import broker_pb2, broker_pb2_grpc
    out = {}
    for n in info.by_role("broker"):
        if n.state not in ("running", "unknown"):
            continue
        ch = rpc.channel(n.address)
        try:
            r = broker_pb2_grpc.BrokerStub(ch).TransactionMetrics(broker_pb2.TransactionMetricsRequest(),
                                                                  timeout=timeout_s)
            out[n.name] = {"PartitionsWithLateTransactionsCount": r.partitions_with_late_transactions_count,
                           "MaxActiveTransactionDuration": r.max_active_transaction_duration_ms,
                           "MaxActiveTransactionPartition": r.max_active_transaction_partition}
        except grpc.RpcError:
            pass                                     # a broker that does not answer shows "-"
        finally:
            ch.close()
    return out
