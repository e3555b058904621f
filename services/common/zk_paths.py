"""Kafka's ZooKeeper layout (ZK mode), used by the controller and the brokers.

Guarantees: one place names every znode and its JSON shape, so the controller
and brokers cannot disagree about where state lives.
"""
import json

CONTROLLER = "/controller"                      # ephemeral: the active controller
CONTROLLER_EPOCH = "/controller_epoch"          # persistent: int, bumped at every election
CONTROLLERS = "/eoslab/controllers"             # ephemeral children: every controller process
BROKER_IDS = "/brokers/ids"                     # ephemeral children: live brokers
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def encode(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes):
    return json.loads(data.decode()) if data else None


def split_hosts(spec: str) -> tuple[str, str]:
    """'host:port[,host:port]/chroot' -> (hosts, chroot or '')."""
    if "/" in spec:
        hosts, chroot = spec.split("/", 1)
        return hosts, "/" + chroot
    return spec, ""
