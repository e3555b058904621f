"""ListOffsets and OffsetsForLeaderEpoch on a broker: offsets looked up, never written.

Guarantees: only a partition's leader answers (NOT_LEADER_OR_FOLLOWER where
the broker knows the partition but does not lead it, UNKNOWN_TOPIC_OR_PARTITION
where it does not know it); a consumer's ListOffsets never answers past what it
may read (the high watermark, or the last stable offset under read_committed),
and ListOffsets v0 never past the high watermark; a timestamp Kafka does not
serve here (-4, -5: tiered storage's) is INVALID_REQUEST. Mixed into
ReplicaManager, whose partitions and metadata it reads.
"""
from __future__ import annotations

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2

MAX_TIMESTAMP = -3   # ListOffsets v7+ (KIP-734): the record with the largest timestamp


class OffsetLookups:
    """ReplicaManager's offset lookups (Kafka's fetchOffsetForTimestamp, legacyFetchOffsetsForTimestamp
    and lastOffsetForLeaderEpoch)."""

    def _leader(self, topic: str, partition: int):
        """The partition this broker leads, else (None, the error to answer)."""
        p = self.partitions.get((topic, partition))
        if p is None or not p.is_leader:
            return None, (E.NOT_LEADER_OR_FOLLOWER if self.metadata.has_partition(topic, partition)
                          else E.UNKNOWN_TOPIC_OR_PARTITION)
        return p, E.NONE

    def list_offsets(self, req: broker_pb2.ListOffsetsRequest) -> broker_pb2.ListOffsetsResponse:
        resp = broker_pb2.ListOffsetsResponse()
        for lp in req.partitions:
            out = resp.partitions.add(topic=lp.topic, partition=lp.partition, offset=-1)
            p, out.error = self._leader(lp.topic, lp.partition)
            if p is None:
                continue
            out.leader_epoch, out.timestamp = p.leader_epoch, -1
            fetchable = (p.last_stable_offset if req.isolation_level == broker_pb2.READ_COMMITTED
                         else p.high_watermark)
            if lp.timestamp == -2:
                out.offset = p.log.log_start_offset
            elif lp.timestamp == -1:
                out.offset = fetchable
            elif lp.timestamp >= 0 or lp.timestamp == MAX_TIMESTAMP:
                with p.lock:
                    found = p.log.fetch_offset_by_timestamp(lp.timestamp, fetchable)
                if found is not None:
                    out.timestamp, out.offset, out.leader_epoch = found
            else:
                out.error = E.INVALID_REQUEST   # -4 / -5 (tiered storage's) are not served
        return resp

    def legacy_offsets_before(self, topic: str, partition: int, timestamp: int, max_num_offsets: int,
                              from_consumer: bool) -> tuple[int, list[int]]:
        """ListOffsets v0 (before KIP-79), as Kafka's UnifiedLog.legacyFetchOffsetsBefore: the base
        offsets of the segments last modified at or before `timestamp` (-1: from the log end, -2: the log
        start), newest first, at most `max_num_offsets`; a consumer's are capped at the high watermark
        (Partition.legacyFetchOffsetsForTimestamp)."""
        p, error = self._leader(topic, partition)
        if p is None:
            return error, []
        offsets = p.log.legacy_fetch_offsets_before(timestamp, max_num_offsets)
        hw = p.high_watermark
        if from_consumer and any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
        return E.NONE, offsets

    def offsets_for_leader_epoch(self, req) -> broker_pb2.OffsetsForLeaderEpochResponse:
        resp = broker_pb2.OffsetsForLeaderEpochResponse()
        for op in req.partitions:
            out = resp.partitions.add(topic=op.topic, partition=op.partition, leader_epoch=-1, end_offset=-1)
            p, out.error = self._leader(op.topic, op.partition)
            if p is None:
                continue
            out.error = p.check_leader_epoch(op.current_leader_epoch)
            if out.error == E.NONE:
                out.leader_epoch, out.end_offset = p.end_offset_for_epoch(op.leader_epoch)
        return resp
