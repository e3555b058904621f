"""Kafka's v2 record batches (magic 2) on the wire, and the one conversion to and from the lab's batches.

Guarantees:
- `decode_batches` accepts exactly what Kafka's broker accepts from a
  producer in the fields the lab keeps: magic 2, a CRC-32C over attributes
  onward that matches, a batch length that covers the records, a record
  count and offset deltas 0..count-1 that agree, records whose lengths add
  up; anything else raises `BatchFormatError` with Kafka's error code
  (CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) and never
  another exception.
- `to_lab` keeps producer id, epoch, base sequence (both -1 in a batch
  without a producer id, whatever it carries, as Kafka ignores them), the
  transactional and control flags, every record's key, value and timestamp (milliseconds), and
  sets the lab's CRC; `to_kafka` writes the lab's batch back as Kafka's bytes
  with the base offset and partition leader epoch the leader assigned and a
  fresh CRC-32C, so `to_lab(decode(to_kafka(b)))` gives back `b`'s records.
- Record headers are kept: a batch with any header becomes a lab batch with
  HEADERS_FLAG, whose records carry their headers in order (keys as bytes,
  values maybe null), and `to_kafka` writes them back as they came. A header
  key of negative length is INVALID_RECORD, as in Kafka's DefaultRecord.
- Compression: all of Kafka's codecs are read (gzip, snappy, lz4, zstd:
  eoslab.common.compression); a codec id beyond them is refused with
  UNSUPPORTED_COMPRESSION_TYPE, a body that does not decompress is
  CORRUPT_MESSAGE; batches are always written uncompressed, and the size
  the batch had as sent rides along (`size_in_bytes`) so that
  max.message.bytes is checked on it, as Kafka checks it, not on the
  decompressed re-encoding.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c

from eoslab.common import compression
from eoslab.common import record_batch as rb
from eoslab.v1 import common_pb2
from eoslab.common.errors import E

UNSUPPORTED_COMPRESSION_TYPE = 76   # Kafka's code (not in the lab's gRPC enum)

HEADER = struct.Struct(">qiibIhiqqqhii")   # base offset .. record count: 61 bytes
HEADER_SIZE = HEADER.size
_CRC_FROM = 21                              # attributes start here; the CRC covers the rest
_LEN_OF_PREFIX = 12                         # base offset + batch length: outside batch_length
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08


class BatchFormatError(ValueError):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class KafkaBatch:
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[tuple]    # (key, value, timestamp ms, headers: ((key, value), ...))
    size_in_bytes: int = 0  # the whole batch as sent (Kafka's sizeInBytes), compressed or not


# -- varints (zigzag, as Kafka's ByteUtils) -------------------------------------------------------
def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "varint too long")


def _write_varint(out: bytearray, v: int) -> None:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _read_bytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos, end)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
    return bytes(buf[pos:pos + n]), pos + n


def _write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(b))
        out += b


# -- decode ----------------------------------------------------------------------------------------
def decode_batches(data: bytes) -> list[KafkaBatch]:
    """Every batch in a Produce partition's `records` bytes."""
    out = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "truncated record batch header")
        (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
         pid, epoch, base_seq, count) = HEADER.unpack_from(data, pos)
        if magic != 2:
            raise BatchFormatError(E.CORRUPT_MESSAGE if magic > 2 else E.INVALID_RECORD,
                                   f"record batch magic {magic}: only magic 2 (v2 batches) is served")
        batch_end = pos + _LEN_OF_PREFIX + batch_length
        if batch_length < HEADER_SIZE - _LEN_OF_PREFIX or batch_end > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, f"batch length {batch_length} out of bounds")
        if _crc32c.crc32c(memoryview(data)[pos + _CRC_FROM:batch_end]) != crc:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "CRC-32C of the record batch does not match")
        if count < 0 or last_delta != count - 1:
            raise BatchFormatError(E.INVALID_RECORD,
                                   f"record count {count} and last offset delta {last_delta} disagree")
        body = memoryview(data)[pos + HEADER_SIZE:batch_end]
        codec = attributes & COMPRESSION_MASK
        if codec > compression.ZSTD:
            raise BatchFormatError(UNSUPPORTED_COMPRESSION_TYPE,
                                   f"compression codec {codec} is not one of Kafka's (1 to 4)")
        if codec:
            try:
                body = compression.decompress(codec, body)
            except compression.TooLarge as e:      # not retriable: the producer fails the batch at once
                raise BatchFormatError(E.INVALID_RECORD, str(e)) from None
            except compression.CodecError as e:
                raise BatchFormatError(E.CORRUPT_MESSAGE, str(e)) from None
        records = _decode_records(body, count, base_ts)
        out.append(KafkaBatch(base_offset, leader_epoch, attributes, base_ts, max_ts, pid, epoch, base_seq,
                              records, batch_end - pos))
        pos = batch_end
    return out


def _decode_records(body, count: int, base_ts: int) -> list:
    records = []
    pos, end = 0, len(body)
    for i in range(count):
        length, pos = _read_varint(body, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length out of bounds")
        pos += 1   # record attributes (unused by Kafka)
        ts_delta, pos = _read_varint(body, pos, rec_end)
        off_delta, pos = _read_varint(body, pos, rec_end)
        if off_delta != i:
            raise BatchFormatError(E.INVALID_RECORD, f"record {i} has offset delta {off_delta}")
        key, pos = _read_bytes(body, pos, rec_end)
        value, pos = _read_bytes(body, pos, rec_end)
        count_h, pos = _read_varint(body, pos, rec_end)
        if count_h < 0:
            raise BatchFormatError(E.INVALID_RECORD, f"record {i} has {count_h} headers")
        headers = []
        for _ in range(count_h):
            hkey, pos = _read_bytes(body, pos, rec_end)
            if hkey is None:
                raise BatchFormatError(E.INVALID_RECORD, "invalid negative header key size")
            hvalue, pos = _read_bytes(body, pos, rec_end)
            headers.append((hkey, hvalue))
        if pos != rec_end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length does not match its fields")
        records.append((key, value, base_ts + ts_delta, tuple(headers)))
    if pos != end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "bytes after the last record of the batch")
    return records


def to_lab(kb: KafkaBatch) -> common_pb2.RecordBatch:
    """The lab's batch for a producer's Kafka batch (its validation then runs as for any client).
    A batch without a producer id carries no epoch or sequence: Kafka's broker ignores them there
    (aiokafka's plain producer writes base sequence 0), so they become -1."""
    anonymous = kb.producer_id == rb.NO_PRODUCER_ID
    headers = any(r[3] for r in kb.records)
    b = rb.batch_from_encoded(rb.encode_records(kb.records, headers), len(kb.records), kb.max_timestamp,
                              producer_id=kb.producer_id,
                              producer_epoch=rb.NO_PRODUCER_EPOCH if anonymous else kb.producer_epoch,
                              base_sequence=rb.NO_SEQUENCE if anonymous else kb.base_sequence,
                              transactional=bool(kb.attributes & rb.TRANSACTIONAL_FLAG),
                              control=bool(kb.attributes & rb.CONTROL_FLAG), headers=headers)
    b.size_in_bytes = kb.size_in_bytes        # max.message.bytes applies to the batch as sent
    return b


# -- encode ----------------------------------------------------------------------------------------
def to_kafka(b) -> bytes:
    """Kafka's v2 bytes for a stored or fetched lab batch (anything with RecordBatch's fields)."""
    records = list(rb.iter_records_with_headers(b.records, rb.has_headers(b)))
    base_ts = records[0][2] if records else -1
    body = bytearray()
    rec = bytearray()
    for i, (key, value, ts, headers) in enumerate(records):
        rec.clear()
        rec.append(0)
        _write_varint(rec, ts - base_ts)
        _write_varint(rec, i)
        _write_bytes(rec, key)
        _write_bytes(rec, value)
        _write_varint(rec, len(headers))
        for hkey, hvalue in headers:
            _write_bytes(rec, hkey)
            _write_bytes(rec, hvalue)
        _write_varint(body, len(rec))
        body += rec
    attributes = b.attributes & (rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG | rb.TIMESTAMP_TYPE_FLAG)
    count = len(records)
    head = HEADER.pack(b.base_offset, HEADER_SIZE - _LEN_OF_PREFIX + len(body), b.partition_leader_epoch, 2, 0,
                       attributes, count - 1, base_ts, b.max_timestamp, b.producer_id, b.producer_epoch,
                       b.base_sequence, count)
    crc = _crc32c.crc32c(body, _crc32c.crc32c(head[_CRC_FROM:]))
    return head[:17] + struct.pack(">I", crc) + head[_CRC_FROM:] + bytes(body)
