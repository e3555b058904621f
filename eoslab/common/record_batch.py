"""Record batches (shared by clients and services): the byte layout of records, the batch body the CRC covers, and validation.

Guarantees: `encode_records` and `iter_records` are inverse; `batch_crc` is
CRC-32C over exactly the fields Kafka's v2 format covers (attributes onward:
producer id, producer epoch, base sequence, record count, max timestamp, the
records), never over base offset or partition leader epoch, which the leader
assigns. `validate_batch` returns Kafka's error code for a malformed or
hostile batch and never raises on bad input.

Record layout (big-endian), repeated record_count times:
    timestamp i64 | key_len i32 (-1 = null) | key | value_len i32 (-1 = null) | value
and, in a batch with the lab's HEADERS_FLAG attribute (bit 8, which Kafka's
v2 format leaves unused and which never reaches Kafka's wire), after each
value: header_count i32 | (hkey_len i32 | hkey | hvalue_len i32 (-1 = null) |
hvalue) * header_count. A record's headers come back exactly as written.

A batch a Kafka client produced keeps its records as the client sent them
(KAFKA_RECORDS_FLAG, bit 9, also the lab's own): `records` is the base
timestamp i64 followed by Kafka's v2 records section, compressed with the
codec in attribute bits 0-2 (Kafka's), so the log stores and serves the
batch as sent and nothing is converted twice. `records_of(batch)` reads the
records of either layout.

A batch the log cleaner rebuilt (OFFSET_DELTA_FLAG, bit 10, the lab's, only
with KAFKA_RECORDS_FLAG) keeps its records' offsets, which need no longer be
dense, and the batch's last offset: `records` is then last_offset_delta i32
| base timestamp i64 | Kafka's records section, whose per-record offset
deltas increase strictly and stay <= last_offset_delta; `record_count` is
the number of records kept and may be 0 (Kafka's empty batch, which keeps a
producer's last sequence). Bit 6 is Kafka's delete-horizon flag: the batch's
base timestamp is then the time after which its tombstones may go. Clients
may send neither bit.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import crc32c as _crc32c

from eoslab.v1 import common_pb2
from eoslab.common import compression, kafka_record_section as section
from eoslab.common.errors import E


NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_PRODUCER_EPOCH = 32767          # Kafka's epoch is an int16
MAX_SEQUENCE = 2**31 - 1            # sequences wrap to 0 after this
TIMESTAMP_TYPE_FLAG = 1 << 3        # Kafka's: the batch's timestamp is the leader's LogAppendTime (its max_timestamp)
TRANSACTIONAL_FLAG = 1 << 4
CONTROL_FLAG = 1 << 5
HEADERS_FLAG = 1 << 8               # the lab's: the records carry headers (see the layout above)
KAFKA_RECORDS_FLAG = 1 << 9         # the lab's: the records are Kafka's, as the producer sent them (below)
DELETE_HORIZON_FLAG = 1 << 6        # Kafka's: the base timestamp is the delete horizon (a cleaned batch)
OFFSET_DELTA_FLAG = 1 << 10         # the lab's: a cleaned batch, offsets sparse, last offset delta kept
COMPRESSION_MASK = section.COMPRESSION_MASK   # Kafka's codec id, in a batch with KAFKA_RECORDS_FLAG only

_REC_HEAD = struct.Struct(">qi")
_LEN = struct.Struct(">i")
_TS = struct.Struct(">q")
_BODY_HEAD = struct.Struct(">hqiiiq")  # attributes, pid, epoch, base seq, count, max ts
_DELTA = struct.Struct(">i")


Header = tuple[bytes, "bytes | None"]


def encode_records(records: list[tuple], with_headers: bool = False) -> bytes:
    """Encode (key, value, timestamp_ms) triples, or (key, value, timestamp_ms, headers) with
    `with_headers` (headers: [(key, value)], the value may be None)."""
    out = bytearray()
    for r in records:
        encode_record(out, r[0], r[1], r[2], (r[3] if len(r) > 3 else ()) if with_headers else None)
    return bytes(out)


def _len_prefixed(data: bytes, pos: int, end: int, what: str, nullable: bool = True) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise ValueError(f"truncated {what} length")
    (n,) = _LEN.unpack_from(data, pos)
    pos += 4
    if n == -1 and nullable:
        return None, pos
    if n < 0:
        raise ValueError(f"negative {what} length")
    if pos + n > end:
        raise ValueError(f"truncated {what}")
    return data[pos:pos + n], pos + n


def iter_records_with_headers(data: bytes, with_headers: bool) -> Iterator[tuple]:
    """Yield (key, value, timestamp_ms, headers); headers is () in a batch without HEADERS_FLAG.
    Raises ValueError on a torn or malformed record set."""
    pos, end = 0, len(data)
    while pos < end:
        if pos + 8 > end:
            raise ValueError("truncated record header")
        (ts,) = _TS.unpack_from(data, pos)
        key, pos = _len_prefixed(data, pos + 8, end, "key")
        value, pos = _len_prefixed(data, pos, end, "value")
        headers: tuple = ()
        if with_headers:
            if pos + 4 > end:
                raise ValueError("truncated header count")
            (n,) = _LEN.unpack_from(data, pos)
            pos += 4
            if n < 0:
                raise ValueError("negative header count")
            hs = []
            for _ in range(n):
                hkey, pos = _len_prefixed(data, pos, end, "header key", nullable=False)
                hvalue, pos = _len_prefixed(data, pos, end, "header value")
                hs.append((hkey, hvalue))
            headers = tuple(hs)
        yield key, value, ts, headers


def iter_records(data: bytes, with_headers: bool = False) -> Iterator[tuple[bytes | None, bytes | None, int]]:
    """Yield (key, value, timestamp_ms), skipping headers; raises ValueError on a torn or malformed
    record set."""
    if with_headers:
        for key, value, ts, _ in iter_records_with_headers(data, True):
            yield key, value, ts
        return
    pos, end = 0, len(data)
    while pos < end:
        if pos + 12 > end:
            raise ValueError("truncated record header")
        ts, klen = _REC_HEAD.unpack_from(data, pos)
        pos += 12
        key = None
        if klen >= 0:
            if pos + klen > end:
                raise ValueError("truncated key")
            key = data[pos:pos + klen]
            pos += klen
        elif klen != -1:
            raise ValueError("negative key length")
        if pos + 4 > end:
            raise ValueError("truncated value length")
        (vlen,) = _LEN.unpack_from(data, pos)
        pos += 4
        value = None
        if vlen >= 0:
            if pos + vlen > end:
                raise ValueError("truncated value")
            value = data[pos:pos + vlen]
            pos += vlen
        elif vlen != -1:
            raise ValueError("negative value length")
        yield key, value, ts


def encode_record(out: bytearray, key: bytes | None, value: bytes | None, ts: int, headers=None) -> None:
    """Append one encoded record to `out` (the producer's batch builder); `headers` (a list, maybe
    empty) only in a batch with HEADERS_FLAG, None otherwise."""
    out += _REC_HEAD.pack(ts, -1 if key is None else len(key))
    if key is not None:
        out += key
    out += _LEN.pack(-1 if value is None else len(value))
    if value is not None:
        out += value
    if headers is not None:
        out += _LEN.pack(len(headers))
        for hkey, hvalue in headers:
            out += _LEN.pack(len(hkey)) + hkey
            out += _LEN.pack(-1 if hvalue is None else len(hvalue))
            if hvalue is not None:
                out += hvalue


def count_records(data: bytes, with_headers: bool = False) -> int:
    """Number of well-formed records in `data`; ValueError when malformed. Copies nothing (without
    headers)."""
    if with_headers:
        return sum(1 for _ in iter_records_with_headers(data, True))
    n, pos, end = 0, 0, len(data)
    head, length = _REC_HEAD.unpack_from, _LEN.unpack_from
    while pos < end:
        if pos + 16 > end:
            raise ValueError("truncated record")
        klen = head(data, pos)[1]
        if klen < -1:
            raise ValueError("negative key length")
        pos += 12 + max(klen, 0)
        if pos + 4 > end:
            raise ValueError("truncated value length")
        vlen = length(data, pos)[0]
        if vlen < -1:
            raise ValueError("negative value length")
        pos += 4 + max(vlen, 0)
        if pos > end:
            raise ValueError("truncated value")
        n += 1
    return n


def has_headers(batch) -> bool:
    return bool(batch.attributes & HEADERS_FLAG)


def kafka_layout(batch) -> bool:
    return bool(batch.attributes & KAFKA_RECORDS_FLAG)


def is_sparse(batch) -> bool:
    """A batch the log cleaner rebuilt: its offsets may have gaps (OFFSET_DELTA_FLAG)."""
    return bool(batch.attributes & OFFSET_DELTA_FLAG)


def last_offset_delta(batch) -> int:
    """The batch's last offset minus its base offset (Kafka's lastOffsetDelta): record_count - 1 for a
    dense batch, as stored for a cleaned one. ValueError when a cleaned batch's prefix is torn."""
    if not batch.attributes & OFFSET_DELTA_FLAG:
        return batch.record_count - 1
    if len(batch.records) < _DELTA.size:
        raise section.BatchFormatError(E.CORRUPT_MESSAGE, "truncated last offset delta")
    return _DELTA.unpack_from(batch.records)[0]


def kafka_section(batch) -> tuple[int, memoryview]:
    """A Kafka-layout batch's base timestamp and its records section (compressed as sent)."""
    skip = _DELTA.size if batch.attributes & OFFSET_DELTA_FLAG else 0
    if len(batch.records) < skip + _TS.size:
        raise section.BatchFormatError(E.CORRUPT_MESSAGE, "truncated base timestamp")
    return _TS.unpack_from(batch.records, skip)[0], memoryview(batch.records)[skip + _TS.size:]


def records_of(batch) -> list[tuple]:
    """(key, value, timestamp ms, headers) of every record of a batch of either layout; ValueError (a
    BatchFormatError with Kafka's code for Kafka's layout) when they are malformed."""
    if not batch.attributes & KAFKA_RECORDS_FLAG:
        return list(iter_records_with_headers(batch.records, has_headers(batch)))
    if batch.attributes & OFFSET_DELTA_FLAG:
        return [r[1:] for r in records_with_offsets(batch)]
    base_ts, body = kafka_section(batch)
    return section.decode_records(section.decompress(batch.attributes & COMPRESSION_MASK, body),
                                  batch.record_count, base_ts)


def records_with_offsets(batch) -> list[tuple]:
    """(offset, key, value, timestamp ms, headers) of every record of a batch of either layout, dense or
    cleaned; ValueError when malformed."""
    base = batch.base_offset
    if not batch.attributes & OFFSET_DELTA_FLAG:
        return [(base + i,) + r for i, r in enumerate(records_of(batch))]
    base_ts, body = kafka_section(batch)
    return [(base + r[0],) + r[1:] for r in
            section.decode_sparse_records(section.decompress(batch.attributes & COMPRESSION_MASK, body),
                                          batch.record_count, base_ts, last_offset_delta(batch))]


def batch_from_kafka(records_section: bytes, base_timestamp: int, record_count: int, max_timestamp: int,
                     codec: int, *, producer_id: int, producer_epoch: int, base_sequence: int,
                     transactional: bool) -> common_pb2.RecordBatch:
    """A Kafka-layout batch (KAFKA_RECORDS_FLAG) around a records section as the producer sent it."""
    attributes = KAFKA_RECORDS_FLAG | (codec & COMPRESSION_MASK) | (TRANSACTIONAL_FLAG if transactional else 0)
    b = common_pb2.RecordBatch(base_offset=0, partition_leader_epoch=-1, producer_id=producer_id,
                               producer_epoch=producer_epoch, base_sequence=base_sequence,
                               record_count=record_count, attributes=attributes, max_timestamp=max_timestamp,
                               records=_TS.pack(base_timestamp) + records_section)
    b.crc = crc_of(b)
    return b


def codec_of(batch) -> int:
    """Kafka's codec id of a batch's records as stored (0 for the lab's own layout)."""
    return batch.attributes & COMPRESSION_MASK if batch.attributes & KAFKA_RECORDS_FLAG else 0


def recompress(batch: common_pb2.RecordBatch, codec: int, level: int | None = None) -> common_pb2.RecordBatch:
    """The batch with its records rewritten in Kafka's layout, compressed with `codec` (0: none) at
    `level`, as Kafka's LogValidator rebuilds a batch whose codec is not the topic's compression.type;
    the producer id, epoch, sequence, timestamps and transactional bit stay. `size_in_bytes` is the
    rebuilt batch's. ValueError for malformed records."""
    body, base_ts = section.encode_records(records_of(batch))
    if codec:
        body = compression.compress(codec, body, level)
    out = batch_from_kafka(body, base_ts, batch.record_count, batch.max_timestamp, codec,
                           producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                           base_sequence=batch.base_sequence,
                           transactional=bool(batch.attributes & TRANSACTIONAL_FLAG))
    out.size_in_bytes = len(body) + 61
    return out


def batch_body(attributes: int, producer_id: int, producer_epoch: int, base_sequence: int,
               record_count: int, max_timestamp: int, records: bytes) -> bytes:
    return _BODY_HEAD.pack(attributes, producer_id, producer_epoch, base_sequence,
                           record_count, max_timestamp) + records


def batch_crc(attributes: int, producer_id: int, producer_epoch: int, base_sequence: int,
              record_count: int, max_timestamp: int, records: bytes) -> int:
    head = _BODY_HEAD.pack(attributes, producer_id, producer_epoch, base_sequence,
                           record_count, max_timestamp)
    return _crc32c.crc32c(records, _crc32c.crc32c(head))


def crc_of(batch: common_pb2.RecordBatch) -> int:
    return batch_crc(batch.attributes, batch.producer_id, batch.producer_epoch,
                     batch.base_sequence, batch.record_count, batch.max_timestamp, batch.records)


def build_batch(records: list[tuple[bytes | None, bytes | None, int]], **kw) -> common_pb2.RecordBatch:
    """A producer-side batch with its CRC set (base offset and leader epoch left for the leader)."""
    return batch_from_encoded(encode_records(records), len(records),
                              max((r[2] for r in records), default=-1), **kw)


def batch_from_encoded(data: bytes, record_count: int, max_timestamp: int, *, producer_id: int = NO_PRODUCER_ID,
                       producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                       transactional: bool = False, control: bool = False,
                       headers: bool = False) -> common_pb2.RecordBatch:
    attributes = ((TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
                  | (HEADERS_FLAG if headers else 0))
    b = common_pb2.RecordBatch(base_offset=0, partition_leader_epoch=-1, producer_id=producer_id,
                               producer_epoch=producer_epoch, base_sequence=base_sequence,
                               record_count=record_count, attributes=attributes,
                               max_timestamp=max_timestamp, records=data)
    b.crc = crc_of(b)
    return b


def last_sequence(base_sequence: int, record_count: int) -> int:
    """Sequence of the batch's last record, wrapping at MAX_SEQUENCE as Kafka does; for a cleaned batch
    pass last_offset_delta + 1 (Kafka's lastSequence counts the offsets, not the records kept)."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    s = base_sequence + record_count - 1
    return s - MAX_SEQUENCE - 1 if s > MAX_SEQUENCE else s


@dataclass(frozen=True)
class BatchError:
    code: int
    message: str
    record_errors: tuple = ()      # (index in the batch, why) of the records at fault (Kafka's RecordError)


def validate_batch(batch: common_pb2.RecordBatch, max_message_bytes: int,
                   compacted: bool = False) -> BatchError | None:
    """Check a produced batch before anything is appended. None means valid. A compacted topic's batch
    with a record without a key is INVALID_RECORD (Kafka's LogValidator)."""
    # the batch as the producer sent it on Kafka's wire (a compressed one is checked compressed, as
    # UnifiedLog.analyzeAndValidateRecords does); a gRPC batch by its records and Kafka's 61-byte header
    size = batch.size_in_bytes or len(batch.records) + 61
    if size > max_message_bytes:
        return BatchError(E.MESSAGE_TOO_LARGE,
                          f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
    if batch.attributes & CONTROL_FLAG:
        return BatchError(E.INVALID_RECORD, "clients may not produce control batches")
    kafka = kafka_layout(batch)
    known = (TRANSACTIONAL_FLAG | CONTROL_FLAG | KAFKA_RECORDS_FLAG | COMPRESSION_MASK if kafka
             else TRANSACTIONAL_FLAG | CONTROL_FLAG | HEADERS_FLAG)
    if batch.attributes & ~known:
        return BatchError(E.INVALID_RECORD, f"unknown attribute bits {batch.attributes:#x}")
    if batch.record_count <= 0:
        return BatchError(E.INVALID_RECORD, f"record count must be positive, got {batch.record_count}")
    if batch.producer_id < NO_PRODUCER_ID:
        return BatchError(E.INVALID_RECORD, f"invalid producer id {batch.producer_id}")
    if batch.producer_id == NO_PRODUCER_ID:
        if batch.producer_epoch != NO_PRODUCER_EPOCH or batch.base_sequence != NO_SEQUENCE:
            return BatchError(E.INVALID_RECORD, "producer epoch and sequence need a producer id")
        if batch.attributes & TRANSACTIONAL_FLAG:
            return BatchError(E.INVALID_RECORD, "a transactional batch needs a producer id")
    else:
        if not 0 <= batch.producer_epoch <= MAX_PRODUCER_EPOCH:
            return BatchError(E.INVALID_REQUEST,
                              f"producer epoch {batch.producer_epoch} outside 0..{MAX_PRODUCER_EPOCH}")
        if batch.base_sequence < 0:
            return BatchError(E.INVALID_RECORD, f"negative base sequence {batch.base_sequence}")
    if crc_of(batch) != batch.crc:
        return BatchError(E.CORRUPT_MESSAGE, "CRC-32C of the batch does not match its contents")
    try:
        if kafka:   # decompressed (at most section's bound) and walked without building the records, as
            # LogValidator walks them (skipKeyValueIterator): exactly record_count records or an error
            _, body = kafka_section(batch)
            nokey = section.check_records(section.decompress(batch.attributes & COMPRESSION_MASK, body),
                                          batch.record_count)
            n = batch.record_count
        else:
            nokey, n = None, count_records(batch.records, has_headers(batch))
    except section.BatchFormatError as e:
        return BatchError(e.code, f"malformed records: {e}")
    except ValueError as e:
        return BatchError(E.CORRUPT_MESSAGE, f"malformed records: {e}")
    if n != batch.record_count:
        return BatchError(E.INVALID_RECORD, f"record count {batch.record_count} does not match the {n} records")
    if compacted:
        if nokey is None:
            nokey = [i for i, (key, _, _) in enumerate(iter_records(batch.records, has_headers(batch)))
                     if key is None]
        keyless = tuple((i, "Compacted topic cannot accept message without key") for i in nokey)
        if keyless:
            return BatchError(E.INVALID_RECORD, "One or more records have been rejected", keyless)
    return None
