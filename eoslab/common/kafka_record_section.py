"""The records section of Kafka's v2 record batch (what follows the 61-byte header), read and written.

Guarantees: `decode_records(body, count, base_ts)` reads exactly `count`
records (varint length, attributes, timestamp and offset deltas, key,
value, headers) whose offset deltas run 0..count-1 and whose lengths add up
to the body, and answers (key, value, timestamp ms, headers) per record
(`decode_sparse_records` the same for a cleaned batch, whose deltas only
increase, with each record's delta in front);
`encode_records` writes them back so that decoding gives the same;
`decompress` opens a compressed section with Kafka's codec id. Anything
malformed raises `BatchFormatError` with Kafka's error code
(CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE), never
another exception. It depends on nothing of the lab's batch format, so the
lab's record_batch and the wire's kafka_records both build on it.
"""
from __future__ import annotations

import os

from eoslab.common import compression
from eoslab.common.errors import E

UNSUPPORTED_COMPRESSION_TYPE = 76   # Kafka's code (not in the lab's gRPC enum)
COMPRESSION_MASK = 0x07


try:   # the C walker of check_records; EOSLAB_PURE_PYTHON_RECORDS=1 leaves it out (benchmarks, tests)
    if os.environ.get("EOSLAB_PURE_PYTHON_RECORDS") == "1":
        raise ImportError("left out by EOSLAB_PURE_PYTHON_RECORDS")
    from eoslab.common._records_native import check_records as _native_check
except ImportError:
    _native_check = None


class BatchFormatError(ValueError):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


# -- varints (zigzag, as Kafka's ByteUtils) -------------------------------------------------------
def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
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


def write_varint(out: bytearray, v: int) -> None:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def read_bytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos, end)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
    return bytes(buf[pos:pos + n]), pos + n


def write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(b))
        out += b


def decompress(codec: int, body) -> bytes:
    """The records section of a batch compressed with Kafka's codec id `codec` (0: as it is)."""
    if not codec:
        return body
    if codec > compression.ZSTD:
        raise BatchFormatError(UNSUPPORTED_COMPRESSION_TYPE, f"compression codec {codec} is not one of Kafka's (1 to 4)")
    try:
        return compression.decompress(codec, body)
    except compression.TooLarge as e:      # not retriable: the producer fails the batch at once
        raise BatchFormatError(E.INVALID_RECORD, str(e)) from None
    except compression.CodecError as e:
        raise BatchFormatError(E.CORRUPT_MESSAGE, str(e)) from None


def decode_records(body, count: int, base_ts: int) -> list:
    return _decode(body, count, base_ts, None)


def decode_sparse_records(body, count: int, base_ts: int, last_delta: int) -> list:
    """A cleaned batch's records, whose offset deltas increase strictly and stay <= `last_delta`:
    (offset delta, key, value, timestamp ms, headers) per record."""
    return _decode(body, count, base_ts, last_delta)


def _decode(body, count: int, base_ts: int, last_delta: int | None) -> list:
    """Dense (`last_delta` None: offset deltas 0..count-1) or sparse records."""
    records = []
    pos, end = 0, len(body)
    prev = -1
    for i in range(count):
        length, pos = read_varint(body, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length out of bounds")
        pos += 1   # record attributes (unused by Kafka)
        ts_delta, pos = read_varint(body, pos, rec_end)
        off_delta, pos = read_varint(body, pos, rec_end)
        if last_delta is None:
            if off_delta != i:
                raise BatchFormatError(E.INVALID_RECORD, f"record {i} has offset delta {off_delta}")
        elif not prev < off_delta <= last_delta:
            raise BatchFormatError(E.CORRUPT_MESSAGE, f"record {i} has offset delta {off_delta} after {prev}")
        prev = off_delta
        key, pos = read_bytes(body, pos, rec_end)
        value, pos = read_bytes(body, pos, rec_end)
        count_h, pos = read_varint(body, pos, rec_end)
        if count_h < 0:
            raise BatchFormatError(E.INVALID_RECORD, f"record {i} has {count_h} headers")
        headers = []
        for _ in range(count_h):
            hkey, pos = read_bytes(body, pos, rec_end)
            if hkey is None:
                raise BatchFormatError(E.INVALID_RECORD, "invalid negative header key size")
            hvalue, pos = read_bytes(body, pos, rec_end)
            headers.append((hkey, hvalue))
        if pos != rec_end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length does not match its fields")
        rec = (key, value, base_ts + ts_delta, tuple(headers))
        records.append(rec if last_delta is None else (off_delta,) + rec)
    if pos != end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "bytes after the last record of the batch")
    return records


def check_records(body, count: int) -> list[int]:
    """What `decode_records` checks, without building the records: `_check_records_py`'s answer, through
    the C walker (`_records_native`, built with the package where a compiler is present) when it has one:
    that walker answers only where the Python one would answer the same, and leaves every malformed or
    unusual section to it, so the error raised is always the Python walker's."""
    if _native_check is not None:
        nokey = _native_check(body, count)
        if nokey is not None:
            return nokey
    return _check_records_py(body, count)


def _check_records_py(body, count: int) -> list[int]:
    """What `decode_records` checks, without building the records (Kafka's skipKeyValueIterator, which
    LogValidator walks where it needs no key or value): raises the same BatchFormatError for the same
    bytes, and answers the indexes of the records without a key (a compacted topic refuses them).
    Varints of one or two bytes, nearly every field of a record, are read inline."""
    nokey = []
    pos, end = 0, len(body)
    for i in range(count):
        # each field: one- or two-byte varint inline (zigzag decoded after), else read_varint
        if pos + 1 < end and body[pos] < 0x80:
            z, pos = body[pos], pos + 1
            length = (z >> 1) ^ -(z & 1)
        elif pos + 1 < end and body[pos + 1] < 0x80:
            z, pos = (body[pos] & 0x7F) | (body[pos + 1] << 7), pos + 2
            length = (z >> 1) ^ -(z & 1)
        else:
            length, pos = read_varint(body, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length out of bounds")
        pos += 1                                      # record attributes (unused by Kafka)
        if pos < rec_end and body[pos] < 0x80:        # timestamp delta: read past
            pos += 1
        elif pos + 1 < rec_end and body[pos + 1] < 0x80:
            pos += 2
        else:
            _, pos = read_varint(body, pos, rec_end)
        if pos < rec_end and body[pos] < 0x80:        # offset delta
            z, pos = body[pos], pos + 1
            v = (z >> 1) ^ -(z & 1)
        elif pos + 1 < rec_end and body[pos + 1] < 0x80:
            z, pos = (body[pos] & 0x7F) | (body[pos + 1] << 7), pos + 2
            v = (z >> 1) ^ -(z & 1)
        else:
            v, pos = read_varint(body, pos, rec_end)
        if v != i:
            raise BatchFormatError(E.INVALID_RECORD, f"record {i} has offset delta {v}")
        if pos < rec_end and body[pos] == 1:          # key length -1 (null): the common case
            nokey.append(i)
            pos += 1
        else:
            v, pos = read_varint(body, pos, rec_end)
            if v == -1:
                nokey.append(i)
            elif v < 0 or pos + v > rec_end:
                raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
            else:
                pos += v
        if pos < rec_end and body[pos] < 0x80:        # value length
            z, pos = body[pos], pos + 1
            v = (z >> 1) ^ -(z & 1)
        elif pos + 1 < rec_end and body[pos + 1] < 0x80:
            z, pos = (body[pos] & 0x7F) | (body[pos + 1] << 7), pos + 2
            v = (z >> 1) ^ -(z & 1)
        else:
            v, pos = read_varint(body, pos, rec_end)
        if v != -1:
            if v < 0 or pos + v > rec_end:
                raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
            pos += v
        if pos < rec_end and body[pos] == 0:          # no headers: the common case
            pos += 1
        else:
            pos = _skip_headers(body, pos, rec_end, i)
        if pos != rec_end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record length does not match its fields")
    if pos != end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "bytes after the last record of the batch")
    return nokey


def _skip_headers(body, pos: int, rec_end: int, i: int) -> int:
    count_h, pos = read_varint(body, pos, rec_end)
    if count_h < 0:
        raise BatchFormatError(E.INVALID_RECORD, f"record {i} has {count_h} headers")
    for _ in range(count_h):
        n, pos = read_varint(body, pos, rec_end)
        if n == -1:
            raise BatchFormatError(E.INVALID_RECORD, "invalid negative header key size")
        if n < -1 or pos + n > rec_end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
        pos += n
        n, pos = read_varint(body, pos, rec_end)
        if n < -1 or (n > 0 and pos + n > rec_end):
            raise BatchFormatError(E.CORRUPT_MESSAGE, "record field length out of bounds")
        pos += max(n, 0)
    return pos


def encode_records(records, offset_deltas=None, base_ts: int | None = None) -> tuple[bytes, int]:
    """Kafka's uncompressed records section for (key, value, timestamp ms, headers) records, and the
    base timestamp its deltas count from (`base_ts`, by default the first record's; -1 for none). The
    offset deltas are 0..n-1 unless given (a cleaned batch's, increasing)."""
    if base_ts is None:
        base_ts = records[0][2] if records else -1
    body = bytearray()
    rec = bytearray()
    for i, (key, value, ts, headers) in enumerate(records):
        rec.clear()
        rec.append(0)
        write_varint(rec, ts - base_ts)
        write_varint(rec, i if offset_deltas is None else offset_deltas[i])
        write_bytes(rec, key)
        write_bytes(rec, value)
        write_varint(rec, len(headers))
        for hkey, hvalue in headers:
            write_bytes(rec, hkey)
            write_bytes(rec, hvalue)
        write_varint(body, len(rec))
        body += rec
    return bytes(body), base_ts
