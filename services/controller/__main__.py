"""`python -m services.controller`: one controller process (active or standby)."""
import argparse
import os

from eoslab.v1 import controller_pb2_grpc
from eoslab.common import rpc
from services.controller.kafka_controller import KafkaController
from services.controller.server import ControllerService


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.controller")
    p.add_argument("--controller-id", type=int, required=True)
    p.add_argument("--listen", required=True, help="HOST:PORT to bind")
    p.add_argument("--advertise", help="HOST:PORT brokers use (default: --listen)")
    p.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    p.add_argument("--zk-session-timeout-ms", type=int, default=2000)
    p.add_argument("--pid-block-size", type=int, default=1000)
    p.add_argument("--default-replication-factor", type=int, default=3,
                   help="used when a topic asks for none (capped by the live brokers)")
    a = p.parse_args()
    if a.pid_block_size <= 0:
        p.error("--pid-block-size must be positive")
    if os.environ.get("EOSLAB_CHECK_ARGS"):   # cluster.service_args: the flags are good, start nothing
        return
    rpc.setup_logging(f"controller-{a.controller_id}")
    host, port = rpc.split_address(a.advertise or a.listen)
    controller = KafkaController(a.controller_id, host, port, a.zookeeper, a.zk_session_timeout_ms,
                                 a.pid_block_size, a.default_replication_factor)
    server = rpc.make_server()
    controller_pb2_grpc.add_ControllerServicer_to_server(ControllerService(controller), server)
    rpc.bind(server, a.listen)
    server.start()
    controller.start()
    rpc.wait_for_termination()
    controller.stop()
    server.stop(1).wait()


if __name__ == "__main__":
    main()
