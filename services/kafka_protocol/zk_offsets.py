"""OffsetCommit v0 and OffsetFetch v0 as ZooKeeper-mode Kafka (0.8.1 to 3.x) serves them: offsets in the
cluster's ZooKeeper, not in __consumer_offsets (KafkaApis.handleOffsetCommitRequest / the v0 branch of
handleOffsetFetchRequest, KafkaZkClient.setOrCreateConsumerOffset / getConsumerOffset).

Guarantees: any broker answers them (no group coordinator, no member or generation check, as in Kafka);
a v0 commit of a partition the broker's metadata has writes the offset, in decimal, to
/consumers/<group>/offsets/<topic>/<partition> (made with its parents when missing) and keeps no
metadata, but metadata longer than offset.metadata.max.bytes (the group coordinator's check, as every
version's) is OFFSET_METADATA_TOO_LARGE and writes nothing; a v0 fetch reads that
znode: (offset, "", NONE), or (-1, "", NONE) for a partition with no znode or one the metadata does
not know (Kafka's UNKNOWN_PARTITION). So offsets committed at v0 and at v1+ live apart, as in Kafka:
a v1+ fetch never sees a v0 commit, nor a v0 fetch a v1+ one. A ZooKeeper failure (connection lost
beyond ZK_TIMEOUT_S, a path ZooKeeper refuses such as an empty group id's) is that partition's
UNKNOWN_SERVER_ERROR (Kafka's Errors.forException), offset -1; never a crash. Unknown partitions and
authorization are decided before these functions, as KafkaApis decides them before the v0 branch
(group_apis.py, group_authorization.py).
"""
from __future__ import annotations

import logging

from eoslab.common.errors import E
from services.broker.group_coordinator import offset_metadata_too_large
from services.common import zk_paths

log = logging.getLogger(__name__)
ZK_TIMEOUT_S = 10.0                     # retries through ConnectionLoss, then UNKNOWN_SERVER_ERROR


def _set_or_create(zk, path: str, data: bytes) -> None:
    from kazoo.exceptions import NodeExistsError, NoNodeError
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:              # made meanwhile by another commit: set it
            zk.set(path, data)


def commit(zk, group: str, topic: str, partition: int, offset: int, metadata: str | None) -> int:
    """One partition of an OffsetCommit v0: its error code."""
    if offset_metadata_too_large(metadata):
        return E.OFFSET_METADATA_TOO_LARGE
    path = zk_paths.consumer_offset_path(group, topic, partition)
    try:
        zk_paths.retrying(zk, ZK_TIMEOUT_S)(_set_or_create, zk, path, str(int(offset)).encode())
    except Exception as e:  # noqa: BLE001 - Kafka: Errors.forException, UNKNOWN_SERVER_ERROR for ZooKeeper's
        log.info("OffsetCommit v0 of %s at %s failed: %r", group, path, e)
        return E.UNKNOWN_SERVER_ERROR
    return E.NONE


def fetch(zk, group: str, topic: str, partition: int) -> tuple[int, int]:
    """One partition of an OffsetFetch v0: (offset, error code); (-1, NONE) when none was committed."""
    from kazoo.exceptions import NoNodeError
    path = zk_paths.consumer_offset_path(group, topic, partition)
    try:
        data, _ = zk_paths.retrying(zk, ZK_TIMEOUT_S)(zk.get, path)
        return int(data.decode("utf-8")), E.NONE
    except NoNodeError:
        return -1, E.NONE
    except Exception as e:  # noqa: BLE001 - a ZooKeeper failure or a znode that is not a number
        log.info("OffsetFetch v0 of %s at %s failed: %r", group, path, e)
        return -1, E.UNKNOWN_SERVER_ERROR


def offset_commit_v0(zk, req, unknown: set) -> dict:
    """The OffsetCommit v0 answer: `unknown`, the (topic, partition) pairs the broker's metadata does not
    know, are UNKNOWN_TOPIC_OR_PARTITION and not written."""
    def error(topic: str, p) -> int:
        if (topic, int(p.partition_index)) in unknown:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        return commit(zk, req.group_id, topic, int(p.partition_index), int(p.committed_offset),
                      p.committed_metadata)
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": error(t.name, p)} for p in t.partitions]}
        for t in req.topics]}


def offset_fetch_v0(zk, metadata, req) -> dict:
    """The OffsetFetch v0 answer (topics and partitions as asked; v0 has no top-level error)."""
    def one(topic: str, partition: int) -> dict:
        offset, err = fetch(zk, req.group_id, topic, partition) if metadata.has_partition(topic, partition) \
            else (-1, E.NONE)
        return {"partition_index": partition, "committed_offset": offset, "metadata": "", "error_code": err}
    return {"topics": [{"name": t.name, "partitions": [one(t.name, int(p)) for p in t.partition_indexes]}
                       for t in req.topics]}
