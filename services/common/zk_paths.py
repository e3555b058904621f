"""Kafka's ZooKeeper layout (ZK mode), used by the controller and the brokers.

Guarantees: one place names every znode and its JSON shape, so the controller
and brokers cannot disagree about where state lives; `connect` is every
service's start on ZooKeeper, retried through ConnectionLoss and
OperationTimeout (a starved machine) instead of a service that exits; `register_ephemeral` is every
service's registration, retried through any ZooKeeper trouble instead of a thread that dies.
"""
import json
import logging

log = logging.getLogger(__name__)
CONTROLLER = "/controller"                      # ephemeral: the active controller
CONTROLLER_EPOCH = "/controller_epoch"          # persistent: int, bumped at every election
CONTROLLERS = "/eoslab/controllers"             # ephemeral children: every controller process
BROKER_IDS = "/brokers/ids"                     # ephemeral children: live brokers
# in a broker's registration: its previous process did not shut down cleanly (KIP-966 reads it)
UNCLEAN_SHUTDOWN_KEY = "eoslab_unclean_shutdown"
# persistent, one child per broker id, written by the active controller (fenced by the controller epoch) once
# it has taken a broker back from an unclean shutdown out of every ISR and ELR: {"broker_epoch": czxid}
UNCLEAN_SHUTDOWN_HANDLED = "/eoslab/unclean_shutdown_handled"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"           # a topic being deleted: its replicas still owed StopReplica
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# persistent: OffsetCommit v0 offsets, /consumers/<group>/offsets/<topic>/<partition> = the offset in decimal
CONSUMERS = "/consumers"
# Transaction coordinators (eoslab's own layout: Kafka's coordinators live in the brokers).
TXN_COORDINATORS = "/eoslab/txn_coordinators"   # ephemeral children: {"host", "port"}
# persistent, written by the active controller only (versioned, fenced by the controller epoch):
# {"version": 1, "partitions": {"<p>": {"coordinator": id, "epoch": coordinator epoch,
#                                        "session": czxid of the owner's registration, "host", "port"}}}
TXN_COORDINATOR_ASSIGNMENT = "/eoslab/txn_coordinator_assignment"


def retrying(zk, timeout_s: float = 60.0):
    """Calls through `zk`, retried on ConnectionLoss / OperationTimeout for up to timeout_s."""
    from kazoo.retry import KazooRetry
    return KazooRetry(max_tries=-1, delay=0.1, max_delay=2.0, deadline=timeout_s, sleep_func=zk.handler.sleep_func)


def connect(zk, paths=(), timeout_s: float = 60.0) -> None:
    """Start the session, lock the root to members (auth.lock_zk_root), make sure `paths` exist."""
    from eoslab.common import auth
    zk.start(timeout=30)
    retry = retrying(zk, timeout_s)
    retry(auth.lock_zk_root, zk)
    for p in paths:
        retry(zk.ensure_path, p)


def register_ephemeral(zk, path: str, data: bytes, stopped, wait, waiting_log=None):
    """Make `path` this session's ephemeral znode (a broker's or a coordinator's registration) and return
    its Stat, or None once `stopped()`. A znode of an earlier session is waited out (`waiting_log()`,
    then `wait()`); one of this session (a create whose answer was lost) is taken as made; any other
    ZooKeeper trouble on the way (ConnectionLoss, a session lost meanwhile) is retried after `wait()`,
    never raised: the caller is a thread that must not die of a flaky connection."""
    from kazoo.exceptions import NodeExistsError, NoNodeError
    while not stopped():
        try:
            try:
                zk.create(path, data, ephemeral=True)
            except NodeExistsError:
                pass
            _, stat = zk.get(path)
            if stat.ephemeralOwner == zk.client_id[0]:
                return stat
            if waiting_log is not None:
                waiting_log()
        except NoNodeError:
            continue                                    # the earlier session's znode just went
        except Exception as e:  # noqa: BLE001 - connection trouble: retry
            log.info("registration at %s failed (%r); retrying", path, e)
        wait()
    return None


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """Kafka's ConsumerOffset.path (ZkData.scala): where OffsetCommit v0 keeps a group's offset."""
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def unclean_shutdown_handled_path(broker_id: int) -> str:
    return f"{UNCLEAN_SHUTDOWN_HANDLED}/{broker_id}"


def txn_coordinator_path(coordinator_id: int) -> str:
    return f"{TXN_COORDINATORS}/{coordinator_id}"


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


def encode_topic(assignment: dict[int, list[int]], topic_id: str) -> bytes:
    """/brokers/topics/<topic> as Kafka's ZooKeeper mode writes it (TopicZNode, version 3 with its id)."""
    return encode({"version": 3, "topic_id": topic_id,
                   "partitions": {str(p): r for p, r in sorted(assignment.items())}})
