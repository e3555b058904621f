"""Kafka's message formats v0 and v1 (magic 0 and 1, before KIP-98's record batches), read and written.

Guarantees:
- `decode_message_set` reads a producer's message set as Kafka's broker reads
  it before up-converting it (LogValidator): each message's CRC-32 over magic
  onward must match, its size must cover its fields, magic must be 0 or 1
  and one magic throughout; a compressed wrapper (gzip, snappy, lz4) is
  inflated within `limit` bytes and its inner messages, which must not be
  compressed themselves, take its place. Anything else raises
  `BatchFormatError` with Kafka's code (CORRUPT_MESSAGE, INVALID_RECORD,
  UNSUPPORTED_COMPRESSION_TYPE) and never another exception.
- `to_lab` up-converts what `decode_message_set` read into one lab batch
  without a producer id, as Kafka >= 0.11 stores old-format messages in a
  v2 batch: keys and values as sent, each magic-1 message's timestamp, no
  timestamp (-1) for magic 0, the wrapper's codec kept, and the largest
  message as sent as the size `max.message.bytes` is checked on.
- `encode_message_set` down-converts fetched lab batches for a consumer that
  reads magic 0 or 1 (Fetch v0-v3), as Kafka's RecordsUtil.downConvert:
  control batches left out, every other record at its own offset, compacted
  gaps included; a compressed batch becomes one wrapper of the same codec
  (magic 1: inner offsets relative to the batch's base, the wrapper at the
  last offset; magic 0: absolute), a LogAppendTime batch gives its records
  the batch's timestamp. Headers cannot be written in these formats and are
  left out. An lz4 wrapper of magic 0 carries the header checksum Kafka
  before 0.10 wrote (over the frame's magic number too, KAFKA-3160), in both
  directions, as Kafka's readers of magic 0 expect it.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from eoslab.common import compression
from eoslab.common import record_batch as rb
from eoslab.common.kafka_record_section import BatchFormatError, UNSUPPORTED_COMPRESSION_TYPE
from eoslab.v1 import common_pb2

E = common_pb2.ErrorCode
_ENTRY = struct.Struct(">qi")            # offset, message size
_HEAD = struct.Struct(">Ibb")            # crc, magic, attributes
_TS = struct.Struct(">q")
_LEN = struct.Struct(">i")
CODEC_MASK = 0x07
TIMESTAMP_TYPE = 0x08                    # magic 1: LogAppendTime
NO_TIMESTAMP = -1
LEGACY_CODECS = (compression.GZIP, compression.SNAPPY, compression.LZ4)


@dataclass(frozen=True, slots=True)
class Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class MessageSet:
    magic: int
    codec: int
    messages: list[Message]
    largest: int             # the largest shallow message as sent (offset and size fields included)


def magic_of(data: bytes) -> int | None:
    """The magic byte of the first entry of a message set or record batch (both keep it at byte 16)."""
    return data[16] if len(data) > 16 else None


def _read_bytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "message truncated in a length field")
    (n,) = _LEN.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "message field longer than the message")
    return bytes(buf[pos:pos + n]), pos + n


def _shallow(buf) -> list[tuple[int, int, Message]]:
    """(size as sent, codec, message) of each top-level message."""
    out = []
    pos, end = 0, len(buf)
    while pos < end:
        if pos + _ENTRY.size + _HEAD.size > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, f"{end - pos} trailing bytes are not a message")
        offset, size = _ENTRY.unpack_from(buf, pos)
        start, stop = pos + _ENTRY.size, pos + _ENTRY.size + size
        if size < _HEAD.size + 8 or stop > end:
            raise BatchFormatError(E.CORRUPT_MESSAGE, f"message size {size} does not fit the message set")
        crc, magic, attributes = _HEAD.unpack_from(buf, start)
        if magic not in (0, 1):
            raise BatchFormatError(E.CORRUPT_MESSAGE, f"magic {magic} in a message set of magic 0/1")
        if zlib.crc32(buf[start + 4:stop]) != crc:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "message CRC does not match its contents")
        p = start + _HEAD.size
        ts = NO_TIMESTAMP
        if magic == 1:
            if p + 8 > stop:
                raise BatchFormatError(E.CORRUPT_MESSAGE, "message truncated in its timestamp")
            (ts,) = _TS.unpack_from(buf, p)
            p += 8
        key, p = _read_bytes(buf, p, stop)
        value, p = _read_bytes(buf, p, stop)
        if p != stop:
            raise BatchFormatError(E.CORRUPT_MESSAGE, "message size disagrees with its fields")
        out.append((stop - pos, attributes & CODEC_MASK, Message(offset, magic, attributes, ts, key, value)))
        pos = stop
    return out


# -- lz4 in magic 0: Kafka before 0.10 computed the frame's header checksum over the magic number too
# (KAFKA-3160); its readers and writers of magic 0 keep that, so the lab does as well.
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: the frame descriptor the LZ4 header checksum covers."""
    assert len(data) < 16
    h = (_P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    for b in data[i:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


def _descriptor_end(frame: bytes) -> int:
    """The offset of an LZ4 frame's header checksum byte (after magic, FLG, BD and any content size)."""
    if len(frame) < 7:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "lz4: frame shorter than its header")
    return 6 + (8 if frame[4] & 0x08 else 0)


def lz4_header_checksum(frame: bytes, broken: bool) -> int:
    end = _descriptor_end(frame)
    return (_xxh32_short(bytes(frame[0 if broken else 4:end])) >> 8) & 0xFF


def _with_header_checksum(frame: bytes, broken: bool) -> bytes:
    end = _descriptor_end(frame)
    return bytes(frame[:end]) + bytes([lz4_header_checksum(frame, broken)]) + bytes(frame[end + 1:])


def _decompress(codec: int, magic: int, data: bytes, limit: int) -> bytes:
    if codec == compression.LZ4 and magic == 0:
        data = _with_header_checksum(data, broken=False)
    return compression.decompress(codec, data, limit)


def _compress(codec: int, magic: int, data: bytes) -> bytes:
    out = compression.compress(codec, data)
    return _with_header_checksum(out, broken=True) if codec == compression.LZ4 and magic == 0 else out


def decode_message_set(data: bytes, limit: int = compression.MAX_DECOMPRESSED_BYTES) -> MessageSet:
    buf = memoryview(data)
    shallow = _shallow(buf)
    if not shallow:
        raise BatchFormatError(E.CORRUPT_MESSAGE, "an empty message set")
    magics = {m.magic for _, _, m in shallow}
    if len(magics) != 1:
        raise BatchFormatError(E.INVALID_RECORD, "messages of more than one magic in one message set")
    codecs = {c for _, c, _ in shallow}
    if len(codecs) != 1:
        raise BatchFormatError(E.INVALID_RECORD, "compressed and uncompressed messages in one message set")
    codec = codecs.pop()
    if codec and codec not in LEGACY_CODECS:
        raise BatchFormatError(UNSUPPORTED_COMPRESSION_TYPE,
                               f"compression codec {codec} is not one of message format v0/v1's")
    messages: list[Message] = []
    for _, _, wrapper in shallow:
        if not codec:
            messages.append(wrapper)
            continue
        try:
            inner = _decompress(codec, wrapper.magic, wrapper.value or b"", limit)
        except compression.TooLarge as e:
            raise BatchFormatError(E.MESSAGE_TOO_LARGE, str(e)) from None
        except compression.CodecError as e:
            raise BatchFormatError(E.CORRUPT_MESSAGE, str(e)) from None
        for _, inner_codec, m in _shallow(memoryview(inner)):
            if inner_codec:
                raise BatchFormatError(E.INVALID_RECORD, "a compressed message inside a compressed wrapper")
            if m.magic != wrapper.magic:
                raise BatchFormatError(E.INVALID_RECORD, "an inner message's magic differs from its wrapper's")
            messages.append(m)
    return MessageSet(magics.pop(), codec, messages, max(size for size, _, _ in shallow))


def to_lab(ms: MessageSet) -> common_pb2.RecordBatch:
    """One lab batch of the messages, up-converted (no producer id, sequence or headers)."""
    records = [(m.key, m.value, m.timestamp if m.magic == 1 else NO_TIMESTAMP) for m in ms.messages]
    b = rb.build_batch(records)
    if ms.codec:
        b = rb.recompress(b, ms.codec)
    b.size_in_bytes = ms.largest
    return b


# -- down-conversion --------------------------------------------------------------------------------
def _message(out: bytearray, offset: int, magic: int, attributes: int, ts: int,
             key: bytes | None, value: bytes | None) -> None:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _TS.pack(ts)
    for field in (key, value):
        if field is None:
            body += _LEN.pack(-1)
        else:
            body += _LEN.pack(len(field)) + field
    out += _ENTRY.pack(offset, 4 + len(body)) + struct.pack(">I", zlib.crc32(body)) + body


def can_down_convert(batch) -> bool:
    """Kafka refuses to down-convert zstd (UNSUPPORTED_COMPRESSION_TYPE for Fetch before v10)."""
    return rb.codec_of(batch) != compression.ZSTD or bool(batch.attributes & rb.CONTROL_FLAG)


def encode_message_set(batches, magic: int) -> bytes:
    """Magic 0 or 1 messages for fetched lab batches (see the module's guarantees)."""
    out = bytearray()
    for b in batches:
        if b.attributes & rb.CONTROL_FLAG:
            continue
        records = rb.records_with_offsets(b)
        if not records:
            continue
        log_append = bool(b.attributes & rb.TIMESTAMP_TYPE_FLAG)
        ts_attr = TIMESTAMP_TYPE if magic == 1 and log_append else 0
        codec = rb.codec_of(b)
        if not codec:
            for offset, key, value, ts, *_ in records:
                _message(out, offset, magic, ts_attr, b.max_timestamp if log_append else ts, key, value)
            continue
        inner = bytearray()
        for offset, key, value, ts, *_ in records:
            _message(inner, offset - b.base_offset if magic == 1 else offset, magic, ts_attr,
                     b.max_timestamp if log_append else ts, key, value)
        wrapper_ts = b.max_timestamp if log_append else max(r[3] for r in records)
        _message(out, records[-1][0], magic, ts_attr | codec, wrapper_ts, None,
                 _compress(codec, magic, bytes(inner)))
    return bytes(out)
