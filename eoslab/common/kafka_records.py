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
  transactional and control flags, every record (key, value, timestamp,
  headers) and sets the lab's CRC; `to_kafka` writes any lab batch as Kafka's
  bytes with the base offset and partition leader epoch the leader assigned
  and a fresh CRC-32C, so `to_lab(decode(to_kafka(b)))` gives back `b`'s
  records. A lab batch with HEADERS_FLAG gets its headers written as they
  came. A header key of negative length is INVALID_RECORD, as in Kafka's
  DefaultRecord.
- Compression: all of Kafka's codecs are read (gzip, snappy, lz4, zstd:
  eoslab.common.compression); a codec id beyond them is refused with
  UNSUPPORTED_COMPRESSION_TYPE, a body that does not decompress is
  CORRUPT_MESSAGE. `to_lab` keeps the records section as it was sent,
  compressed or not (record_batch.KAFKA_RECORDS_FLAG), with the size the
  batch had as sent (`size_in_bytes`, on which max.message.bytes is
  checked, as Kafka checks it), and `to_kafka` serves such a batch with
  that section untouched: a consumer gets the bytes the producer sent.
  A batch the log cleaner rebuilt goes out with its own last offset delta
  and delete-horizon flag, as Kafka serves a cleaned batch.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c

from eoslab.common import record_batch as rb
from eoslab.common.compression import ZSTD
from eoslab.common.kafka_record_section import (COMPRESSION_MASK, UNSUPPORTED_COMPRESSION_TYPE,  # noqa: F401
                                                BatchFormatError, decode_records, decompress, encode_records)
from eoslab.v1 import common_pb2
from eoslab.common.errors import E


HEADER = struct.Struct(">qiibIhiqqqhii")   # base offset .. record count: 61 bytes
HEADER_SIZE = HEADER.size
_CRC_FROM = 21                              # attributes start here; the CRC covers the rest
_LEN_OF_PREFIX = 12                         # base offset + batch length: outside batch_length
TIMESTAMP_TYPE_FLAG = 0x08


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
    section: bytes = b""    # the records section as sent (compressed with the codec in `attributes`)
    record_count: int = 0   # as its header says


# -- decode ----------------------------------------------------------------------------------------
def decode_batches(data: bytes, read_records: bool = True) -> list[KafkaBatch]:
    """Every batch in a Produce partition's `records` bytes. Without `read_records` only the batch is
    checked (header, length, CRC, codec id) and its records are left to be read once where they are
    appended (record_batch.validate_batch): `records` is then empty."""
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
        sent = memoryview(data)[pos + HEADER_SIZE:batch_end]
        codec = attributes & COMPRESSION_MASK
        if codec > ZSTD:
            raise BatchFormatError(UNSUPPORTED_COMPRESSION_TYPE,
                                   f"compression codec {codec} is not one of Kafka's (1 to 4)")
        records = decode_records(decompress(codec, sent), count, base_ts) if read_records else []
        out.append(KafkaBatch(base_offset, leader_epoch, attributes, base_ts, max_ts, pid, epoch, base_seq,
                              records, batch_end - pos, bytes(sent), count))
        pos = batch_end
    return out


def to_lab(kb: KafkaBatch) -> common_pb2.RecordBatch:
    """The lab's batch for a producer's Kafka batch, its records as sent (Kafka's layout, compressed as
    they came: record_batch.KAFKA_RECORDS_FLAG); its validation then runs as for any client. A batch
    without a producer id carries no epoch or sequence: Kafka's broker ignores them there (aiokafka's
    plain producer writes base sequence 0), so they become -1. A control batch keeps its flag, and the
    partition refuses it as Kafka does."""
    anonymous = kb.producer_id == rb.NO_PRODUCER_ID
    b = rb.batch_from_kafka(kb.section, kb.base_timestamp, kb.record_count, kb.max_timestamp,
                            kb.attributes & COMPRESSION_MASK, producer_id=kb.producer_id,
                            producer_epoch=rb.NO_PRODUCER_EPOCH if anonymous else kb.producer_epoch,
                            base_sequence=rb.NO_SEQUENCE if anonymous else kb.base_sequence,
                            transactional=bool(kb.attributes & rb.TRANSACTIONAL_FLAG))
    if kb.attributes & rb.CONTROL_FLAG:
        b.attributes |= rb.CONTROL_FLAG
        b.crc = rb.crc_of(b)
    b.size_in_bytes = kb.size_in_bytes        # max.message.bytes applies to the batch as sent
    return b


# -- encode ----------------------------------------------------------------------------------------
def to_kafka(b) -> bytes:
    """Kafka's v2 bytes for a stored or fetched lab batch (anything with RecordBatch's fields): a batch a
    Kafka client produced as it was sent (its records section untouched, compressed or not), any other
    written out in Kafka's layout, uncompressed."""
    attributes = b.attributes & (rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG | rb.TIMESTAMP_TYPE_FLAG
                                 | rb.DELETE_HORIZON_FLAG)
    if rb.kafka_layout(b):
        base_ts, body = rb.kafka_section(b)
        attributes |= b.attributes & COMPRESSION_MASK
        count = b.record_count
        last_delta = rb.last_offset_delta(b)     # a cleaned batch keeps its last offset, gaps and all
    else:
        records = list(rb.iter_records_with_headers(b.records, rb.has_headers(b)))
        body, base_ts = encode_records(records)
        count = len(records)
        last_delta = count - 1
    head = HEADER.pack(b.base_offset, HEADER_SIZE - _LEN_OF_PREFIX + len(body), b.partition_leader_epoch, 2, 0,
                       attributes, last_delta, base_ts, b.max_timestamp, b.producer_id, b.producer_epoch,
                       b.base_sequence, count)
    crc = _crc32c.crc32c(body, _crc32c.crc32c(head[_CRC_FROM:]))
    return head[:17] + struct.pack(">I", crc) + head[_CRC_FROM:] + bytes(body)
