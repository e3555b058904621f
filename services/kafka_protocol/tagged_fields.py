"""Unknown tagged fields in a flexible request, skipped as Kafka skips them (KIP-482).

Guarantees: `strip_unknown_tags(cls, frame, pos)` returns the body of a
flexible request of schema `cls` that starts at `pos`, with every tagged
field whose tag `cls` (or the nested struct it sits in) does not define
removed, and everything else byte for byte; the caller parses that instead.
Kafka's generated readers skip a tag they do not know, so a newer client may
add tagged fields without a new version; kio raises on them. A known tagged
field is kept whole (tags nested inside it are not looked at). Bytes that do
not follow the schema raise ValueError.
"""
from __future__ import annotations

import dataclasses
import types
import typing

_FIXED = {"int8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "timedelta_i32": 4,
          "int64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16}
_COMPACT = ("string", "bytes", "records")      # uvarint length + 1 (0: null), then the bytes


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError("a varint runs past the request")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        b, value = value & 0x7F, value >> 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _nullable(tp):
    """(the type without None, whether None was allowed)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _field(tp, kafka_type: str | None, data: bytes, pos: int, out: bytearray) -> int:
    tp, nullable = _nullable(tp)
    if typing.get_origin(tp) is tuple:
        start = pos
        n, pos = _uvarint(data, pos)
        out += data[start:pos]
        elem = typing.get_args(tp)[0]
        for _ in range(max(n - 1, 0)):
            pos = _field(elem, kafka_type, data, pos, out)
        return pos
    if dataclasses.is_dataclass(tp):
        if nullable:                            # a nullable struct: int8 -1 (null) or 1, then the struct
            out += data[pos:pos + 1]
            if data[pos] == 0xFF:
                return pos + 1
            pos += 1
        return _struct(tp, data, pos, out)
    start = pos
    if kafka_type in _FIXED:
        pos += _FIXED[kafka_type]
    elif kafka_type in _COMPACT:
        n, pos = _uvarint(data, pos)
        pos += max(n - 1, 0)
    else:
        raise ValueError(f"no rule for kafka type {kafka_type!r}")
    if pos > len(data):
        raise ValueError("a field runs past the request")
    out += data[start:pos]
    return pos


def _struct(cls, data: bytes, pos: int, out: bytearray) -> int:
    known = set()
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            known.add(f.metadata["tag"])
            continue
        pos = _field(f.type, f.metadata.get("kafka_type"), data, pos, out)
    count, pos = _uvarint(data, pos)
    kept = []
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        if pos + size > len(data):
            raise ValueError("a tagged field runs past the request")
        if tag in known:
            kept.append((tag, data[pos:pos + size]))
        pos += size
    out += _uvarint_bytes(len(kept))
    for tag, value in kept:
        out += _uvarint_bytes(tag) + _uvarint_bytes(len(value)) + value
    return pos


def strip_unknown_tags(cls, frame: bytes, pos: int) -> bytes:
    out = bytearray()
    _struct(cls, frame, pos, out)
    return bytes(out)
