"""Kafka's record batch codecs, read: gzip, snappy, lz4 and zstd, as Kafka's producers write them.

Guarantees: `decompress(codec, data)` returns the records section of a v2
batch compressed with Kafka's codec id (1 gzip, 2 snappy, 3 lz4, 4 zstd) or
raises `CodecError` with one readable line, never another exception.
Snappy is read both framed as Kafka's Java producer frames it (xerial's
SnappyOutputStream: the 8-byte magic, two version ints, then length-prefixed
raw blocks) and raw (librdkafka); lz4 is the LZ4 frame format (Kafka's
KafkaLZ4BlockOutputStream for magic 2); zstd is a zstd frame. The codecs
come from cramjam, one maintained binding of all of them.
"""
from __future__ import annotations

import zlib

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
NAMES = {0: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16                  # magic, version int, compatible-version int


class CodecError(ValueError):
    pass


def _xerial(data: bytes, raw) -> bytes:
    out, pos, end = bytearray(), XERIAL_HEADER, len(data)
    while pos < end:
        if end - pos < 4:
            raise CodecError("snappy: truncated xerial block length")
        n = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if n < 0 or pos + n > end:
            raise CodecError("snappy: xerial block runs past the batch")
        out += bytes(raw(data[pos:pos + n]))
        pos += n
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        try:
            return zlib.decompress(bytes(data), wbits=31)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
    try:
        import cramjam
    except ImportError:
        raise CodecError(f"{NAMES.get(codec, codec)}: the cramjam package is not installed") from None
    data = bytes(data)
    try:
        if codec == SNAPPY:
            if data[:8] == XERIAL_MAGIC:
                return _xerial(data, cramjam.snappy.decompress_raw)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CodecError(f"{NAMES[codec]}: {str(e).splitlines()[0] if str(e) else 'corrupt data'}") from None
    raise CodecError(f"compression codec {codec} is not one of Kafka's (1 gzip, 2 snappy, 3 lz4, 4 zstd)")
