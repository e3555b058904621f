"""When does a cluster serve? One answer for every runtime, asked over gRPC from where the runtime runs.

Guarantees: `problem(info)` returns None only when, among the nodes
`info` lists as running, a controller answers DescribeCluster as the active
one (error NONE) with every running broker live, every running broker's
Metadata lists every running broker, and every running transaction
coordinator answers DescribeTransactions; otherwise it returns one line
saying what is missing. Nodes that are not running (killed, paused) are not
waited for: this is the meaning of LocalRuntime.wait_ready, for the runtimes
that reach their nodes' addresses directly (Docker on Linux).
"""
from __future__ import annotations

import grpc

from cluster.runtime import ClusterInfo


def problem(info: ClusterInfo, timeout: float = 2.0) -> str | None:
    from eoslab.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, txn_pb2, txn_pb2_grpc
    from eoslab.common import rpc
    running = [n for n in info.nodes if n.state == "running"]
    brokers = [n for n in running if n.role == "broker"]
    ids = {n.node_id for n in brokers}
    active = None
    for n in (n for n in running if n.role == "controller"):
        try:
            with rpc.channel(n.address) as ch:
                r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                           timeout=timeout)
        except grpc.RpcError:
            continue
        if r.error == 0:
            active = n.name
            live = {b.broker_id for b in r.live_brokers}
            if not live >= ids:
                return f"{n.name} sees brokers {sorted(live)}, not yet all of {sorted(ids)}"
    if active is None:
        return "no active controller answers yet"
    for n in brokers:
        try:
            with rpc.channel(n.address) as ch:
                r = broker_pb2_grpc.BrokerStub(ch).Metadata(broker_pb2.MetadataRequest(), timeout=timeout)
        except grpc.RpcError as e:
            return f"{n.name} does not answer Metadata ({e.code().name})"
        seen = {b.broker_id for b in r.brokers}
        if not seen >= ids:
            return f"{n.name} lists brokers {sorted(seen)}, not yet all of {sorted(ids)}"
    for n in (n for n in running if n.role == "txn-coordinator"):
        try:
            with rpc.channel(n.address) as ch:
                txn_pb2_grpc.TransactionCoordinatorStub(ch).DescribeTransactions(
                    txn_pb2.DescribeTransactionsRequest(), timeout=timeout)
        except grpc.RpcError as e:
            return f"{n.name} does not answer DescribeTransactions ({e.code().name})"
    return None
