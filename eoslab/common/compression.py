"""Kafka's record batch codecs, read and written: gzip, snappy, lz4 and zstd, as Kafka writes them.

Guarantees: `decompress(codec, data)` returns the records section of a v2
batch compressed with Kafka's codec id (1 gzip, 2 snappy, 3 lz4, 4 zstd) or
raises `CodecError` with one readable line, never another exception.
Snappy is read both framed as Kafka's Java producer frames it (xerial's
SnappyOutputStream: the 8-byte magic, two version ints, then length-prefixed
raw blocks) and raw (librdkafka); lz4 is the LZ4 frame format (Kafka's
KafkaLZ4BlockOutputStream for magic 2); zstd is a zstd frame. The codecs
come from cramjam, one maintained binding of all of them.

A records section that would decompress to more than `MAX_DECOMPRESSED_BYTES`
raises `TooLarge` (a CodecError) without ever holding more than that: the
lab decodes a batch's records whole, where Kafka's broker streams them one
at a time, so a compression bomb must be stopped at the codec.

`compress(codec, data, level)` writes what Kafka's broker writes when a
topic's compression.type recompresses a batch (Kafka's CompressionType):
gzip at Deflater's level (-1 is zlib's default, 6), snappy framed as the
Java producer frames it (32 KB blocks), an LZ4 frame and a zstd frame at
the topic's level; `decompress` reads every one back.
"""
from __future__ import annotations

import zlib

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
NAMES = {0: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16                  # magic, version int, compatible-version int
XERIAL_BLOCK = 32 * 1024            # SnappyOutputStream's default block size
DEFAULT_LEVELS = {GZIP: -1, LZ4: 9, ZSTD: 3}    # compression.{gzip,lz4,zstd}.level defaults (KIP-390)


MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
FIRST_GUESS = 8                     # first output buffer: this many times the input (then x8 up to the bound)


class CodecError(ValueError):
    pass


class TooLarge(CodecError):
    """The records decompress to more than the bound."""


def _too_large(codec: int, limit: int) -> TooLarge:
    return TooLarge(f"{NAMES[codec]}: the records decompress to more than {limit} bytes, the lab's bound")


def _bounded_into(codec: int, fn, data: bytes, limit: int) -> bytes:
    """fn(data, buffer) -> bytes written, into buffers growing x8 up to `limit`."""
    import cramjam
    size = min(limit, max(1 << 16, FIRST_GUESS * len(data)))
    while True:
        buf = bytearray(size)
        try:
            return bytes(memoryview(buf)[:fn(data, buf)])
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):
                raise
            if size >= limit:
                raise _too_large(codec, limit) from None
            size = min(limit, size * 8)


def _snappy_length(data: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its leading uvarint)."""
    n = shift = 0
    for i, b in enumerate(data[:10]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise CodecError("snappy: no length preamble")


def _xerial(data: bytes, raw, limit: int) -> bytes:
    out, pos, end = bytearray(), XERIAL_HEADER, len(data)
    while pos < end:
        if end - pos < 4:
            raise CodecError("snappy: truncated xerial block length")
        n = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if n < 0 or pos + n > end:
            raise CodecError("snappy: xerial block runs past the batch")
        if len(out) + _snappy_length(data[pos:pos + n]) > limit:
            raise _too_large(SNAPPY, limit)
        out += bytes(raw(data[pos:pos + n]))
        pos += n
    return bytes(out)


def decompress(codec: int, data: bytes, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    if codec == GZIP:
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(bytes(data), limit + 1)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
        if len(out) > limit:
            raise _too_large(GZIP, limit)
        if not d.eof:
            raise CodecError("gzip: incomplete or truncated stream")
        return out
    try:
        import cramjam
    except ImportError:
        raise CodecError(f"{NAMES.get(codec, codec)}: the cramjam package is not installed") from None
    data = bytes(data)
    try:
        if codec == SNAPPY:
            if data[:8] == XERIAL_MAGIC:
                return _xerial(data, cramjam.snappy.decompress_raw, limit)
            if _snappy_length(data) > limit:
                raise _too_large(SNAPPY, limit)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return _bounded_into(LZ4, cramjam.lz4.decompress_into, data, limit)
        if codec == ZSTD:
            return _bounded_into(ZSTD, cramjam.zstd.decompress_into, data, limit)
    except cramjam.DecompressionError as e:
        raise CodecError(f"{NAMES[codec]}: {str(e).splitlines()[0] if str(e) else 'corrupt data'}") from None
    raise CodecError(f"compression codec {codec} is not one of Kafka's (1 gzip, 2 snappy, 3 lz4, 4 zstd)")


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with Kafka's codec id `codec` at `level` (None: Kafka's default level)."""
    data = bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec == GZIP:
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    import cramjam
    if codec == SNAPPY:
        out = bytearray(XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big"))
        for pos in range(0, len(data), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[pos:pos + XERIAL_BLOCK]))
            out += len(block).to_bytes(4, "big") + block
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise CodecError(f"compression codec {codec} is not one of Kafka's (1 gzip, 2 snappy, 3 lz4, 4 zstd)")
