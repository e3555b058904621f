"""`python -m services.sidecar`: the fault sidecar for one service's network namespace.

Runs beside a service (same network namespace: Docker `network_mode:
service:<name>`, a Kubernetes pod's second container) with NET_ADMIN.
Guarantees: refuses to start without a token; on start it removes whatever
an earlier sidecar left in the namespace; on SIGTERM/SIGINT it removes
every rule it applied, and its chains, before exiting.
"""
import argparse
import logging
import os
import sys
from concurrent import futures

import grpc

from eoslab.v1 import sidecar_pb2_grpc
from eoslab.common import rpc
from services.sidecar.faults import Faults
from services.sidecar.iptables import IptablesError
from services.sidecar.peers import Peers, UnknownPeer
from services.sidecar.server import SidecarService, TokenInterceptor

DEFAULT_PORT = 9191
log = logging.getLogger("sidecar")


def control_port(listen: str) -> int | None:
    if listen.startswith("unix:"):
        return None
    return rpc.split_address(listen)[1]


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.sidecar")
    p.add_argument("--listen", default=f"0.0.0.0:{DEFAULT_PORT}", help="HOST:PORT or unix:PATH for the gRPC API")
    p.add_argument("--token", default=os.environ.get("EOSLAB_SIDECAR_TOKEN", ""),
                   help="shared token (default: $EOSLAB_SIDECAR_TOKEN)")
    p.add_argument("--service-port", type=int, default=0,
                   help="the port of the service beside it (drop-responses default)")
    p.add_argument("--peer", action="append", default=[], metavar="NAME[=IP]",
                   help="a peer by name (resolved by DNS, remembered) or NAME=IP; repeatable")
    p.add_argument("--peers", default=os.environ.get("EOSLAB_SIDECAR_PEERS", ""), metavar="NAME[=IP],...",
                   help="comma-separated peers, as --peer (default: $EOSLAB_SIDECAR_PEERS)")
    p.add_argument("--name", default=os.environ.get("HOSTNAME", "sidecar"), help="for logs")
    a = p.parse_args()
    if not a.token:
        p.error("no token: pass --token or set EOSLAB_SIDECAR_TOKEN")
    if not 0 <= a.service_port <= 65535:
        p.error(f"--service-port: must be in [0, 65535], got {a.service_port}")
    try:
        peers = Peers.parse(a.peer + [x.strip() for x in a.peers.split(",") if x.strip()])
    except UnknownPeer as e:
        p.error(str(e))
    rpc.setup_logging(f"sidecar[{a.name}]")
    faults = Faults(peers, control_port(a.listen), a.service_port or None)
    try:
        faults.start()
    except IptablesError as e:
        print(f"sidecar: cannot set up iptables (is NET_ADMIN granted?): {e}", file=sys.stderr)
        sys.exit(1)
    peers.warm()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=[TokenInterceptor(a.token)],
                      options=rpc.CHANNEL_OPTIONS)
    sidecar_pb2_grpc.add_SidecarServicer_to_server(SidecarService(faults), srv)
    rpc.bind(srv, a.listen)
    srv.start()
    log.info("listening on %s (delay mode: %s, peers: %s)", a.listen, faults.delay_mode,
             ", ".join(f"{k}={v}" for k, v in sorted(peers.known().items())) or "none resolved yet")
    rpc.wait_for_termination()
    srv.stop(1).wait()
    faults.shutdown()
    log.info("every rule removed; exiting")


if __name__ == "__main__":
    main()
