"""Rebuilding a batch with some of its records dropped, as Kafka's log cleaner does (MemoryRecords.filterTo).

Guarantees: `filtered_batch(original, kept, ...)` answers a batch that keeps
the original's base offset, last offset, partition leader epoch, producer
id, epoch and base sequence (so its last sequence is unchanged), its
transactional, control and timestamp-type bits and, for a batch a Kafka
client produced, its codec; the kept records keep their own offsets and
timestamps, so offsets may have gaps (record_batch.OFFSET_DELTA_FLAG). With
a delete horizon the batch carries Kafka's flag and the horizon as its base
timestamp. `empty_batch(original)` is Kafka's empty header: no records, the
same offsets and producer fields, which keeps a producer's last sequence in
the log when all its records went. Both carry a CRC that matches.
"""
from __future__ import annotations

import struct

from eoslab.common import compression, kafka_record_section as section, record_batch as rb
from eoslab.v1 import common_pb2

_PREFIX = struct.Struct(">iq")      # last offset delta, base timestamp
_KEPT_BITS = rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG | rb.TIMESTAMP_TYPE_FLAG


def _rebuilt(original, attributes: int, record_count: int, max_timestamp: int, records: bytes):
    b = common_pb2.RecordBatch(base_offset=original.base_offset,
                               partition_leader_epoch=_leader_epoch(original),
                               producer_id=original.producer_id, producer_epoch=original.producer_epoch,
                               base_sequence=original.base_sequence, record_count=record_count,
                               attributes=attributes, max_timestamp=max_timestamp, records=records)
    b.crc = rb.crc_of(b)
    return b


def _leader_epoch(batch) -> int:
    return getattr(batch, "partition_leader_epoch", getattr(batch, "leader_epoch", -1))


def filtered_batch(original, kept: list[tuple], delete_horizon: int | None = None) -> common_pb2.RecordBatch:
    """`original` with only `kept`, (offset, key, value, timestamp ms, headers) records of it in offset
    order; `delete_horizon` (ms) sets Kafka's delete-horizon flag when the original has none yet."""
    if not kept:
        raise ValueError("a batch with no record left is empty_batch's")
    last_delta = rb.last_offset_delta(original)
    codec = rb.codec_of(original)
    attributes = rb.KAFKA_RECORDS_FLAG | rb.OFFSET_DELTA_FLAG | codec | (original.attributes & _KEPT_BITS)
    if original.attributes & rb.DELETE_HORIZON_FLAG:
        attributes |= rb.DELETE_HORIZON_FLAG
        base_ts = rb.kafka_section(original)[0]
    elif delete_horizon is not None:
        attributes |= rb.DELETE_HORIZON_FLAG
        base_ts = delete_horizon
    else:
        base_ts = kept[0][3]
    deltas = [r[0] - original.base_offset for r in kept]
    if deltas[0] < 0 or deltas[-1] > last_delta or any(a >= b for a, b in zip(deltas, deltas[1:])):
        raise ValueError(f"kept offsets {[r[0] for r in kept]} are not in the batch's order and range")
    body, _ = section.encode_records([r[1:] for r in kept], deltas, base_ts)
    if codec:
        body = compression.compress(codec, body)
    if original.attributes & rb.TIMESTAMP_TYPE_FLAG:
        max_ts = original.max_timestamp          # LogAppendTime: the leader's time stays the batch's
    else:
        max_ts = max(r[3] for r in kept)
    return _rebuilt(original, attributes, len(kept), max_ts, _PREFIX.pack(last_delta, base_ts) + body)


def empty_batch(original) -> common_pb2.RecordBatch:
    """Kafka's empty batch for `original` (DefaultRecordBatch.writeEmptyHeader): no records, base
    timestamp -1, no horizon, uncompressed, the original's offsets, producer fields and max timestamp."""
    attributes = rb.KAFKA_RECORDS_FLAG | rb.OFFSET_DELTA_FLAG | (original.attributes & _KEPT_BITS)
    return _rebuilt(original, attributes, 0, original.max_timestamp,
                    _PREFIX.pack(rb.last_offset_delta(original), -1))


def delete_horizon(batch) -> int | None:
    """The batch's delete horizon (ms), or None when it has none."""
    if not batch.attributes & rb.DELETE_HORIZON_FLAG:
        return None
    return rb.kafka_section(batch)[0]
