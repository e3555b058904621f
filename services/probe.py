"""`python -m services.probe broker|controller HOST:PORT`: exit 0 when that service answers.

For container healthchecks and the runtimes' readiness waits: a broker is
healthy once it answers Metadata and knows at least itself as a live broker;
a controller once it answers DescribeCluster (active or standby).
"""
import sys

import grpc

from eoslab.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc
from eoslab.common import rpc


def probe(role: str, address: str, timeout: float = 2.0) -> bool:
    try:
        with rpc.channel(address) as ch:
            if role == "broker":
                r = broker_pb2_grpc.BrokerStub(ch).Metadata(broker_pb2.MetadataRequest(), timeout=timeout)
                return len(r.brokers) > 0
            if role == "controller":
                controller_pb2_grpc.ControllerStub(ch).DescribeCluster(
                    controller_pb2.DescribeClusterRequest(), timeout=timeout)
                return True
    except grpc.RpcError:
        return False
    raise ValueError(f"unknown role {role!r} (broker or controller)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m services.probe broker|controller HOST:PORT", file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(0 if probe(sys.argv[1], sys.argv[2]) else 1)
    except ValueError as e:
        print(f"probe: {e}", file=sys.stderr)
        sys.exit(2)
