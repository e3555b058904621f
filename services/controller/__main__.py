"""`python -m services.controller`: one controller process (active or standby); settings from ControllerConfig."""
import sys

from eoslab.v1 import controller_pb2_grpc
from eoslab.common import rpc
from eoslab.common.config import ConfigError
from services.controller.config import ControllerConfig
from services.controller.kafka_controller import KafkaController
from services.controller.server import ControllerService


def main(argv: list[str] | None = None) -> None:
    try:
        a = ControllerConfig.parse(sys.argv[1:] if argv is None else argv)
    except ConfigError as e:
        sys.exit(f"python -m services.controller: {e}")
    rpc.setup_logging(f"controller-{a.controller_id}")
    host, port = rpc.split_address(a.advertise or a.listen)
    controller = KafkaController(a.controller_id, host, port, a.zookeeper, a.zk_session_timeout_ms,
                                 a.pid_block_size, a.default_replication_factor,
                                 eligible_leader_replicas=a.eligible_leader_replicas,
                                 min_insync_replicas=a.min_insync_replicas)
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
