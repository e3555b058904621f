"""Frames of Kafka's binary protocol: request headers, bodies and responses, through kio's schemas.

Guarantees: `parse_request` reads a request whose (API key, version) is served
into kio's entity for exactly that version (the versions Kafka 4.0 removed, which
kio has no schema of, through legacy_versions) (flexible versions with tagged
fields and compact types included; a tagged field the schema does not know is
skipped, as Kafka skips it) or raises `MalformedRequest` (bytes that do
not parse) or `UnsupportedVersion` (an API or version not
served: the header was read, so the caller can answer it). `encode_response`
writes the response header Kafka uses for that API and version (v1 with
tagged fields when flexible, v0 otherwise and always for ApiVersions) and
the size prefix; `parse_response` reads such a frame back. `make` builds a kio entity from plain Python values: ints for
error codes and millisecond durations, dicts for nested structs, and Kafka's
defaults for fields left out; a timestamp field takes epoch milliseconds (-1, Kafka's "none",
included).
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import typing
import uuid

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from services.kafka_protocol.tagged_fields import strip_unknown_tags

API_VERSIONS = 18
_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
ZERO_UUID = uuid.UUID(int=0)


class MalformedRequest(ValueError):
    """The frame cannot be read as a request: the connection is closed."""


class UnsupportedVersion(Exception):
    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"API {api_key} version {api_version} is not served")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    if len(frame) < _HEAD.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes has no header")
    return _HEAD.unpack_from(frame)


def parse_request(frame: bytes, served: dict[int, tuple[int, int]]):
    """(RequestHeader, kio request entity) for a request frame (size prefix already removed)."""
    api_key, version, corr = peek_header(frame)
    lo_hi = served.get(api_key)
    if lo_hi is None or not lo_hi[0] <= version <= lo_hi[1]:
        raise UnsupportedVersion(api_key, version, corr)
    from services.kafka_protocol import legacy_versions
    if legacy_versions.is_legacy(api_key, version):
        client_id, hsize = _v1_client_id(frame)
        return RequestHeader(api_key, version, corr, client_id), legacy_versions.parse_body(api_key, version,
                                                                                            frame, hsize)
    cls = load_request_schema(api_key, version)
    try:
        header, hsize = entity_reader(cls.__header_schema__)(frame, 0)
        try:
            body, bsize = entity_reader(cls)(frame, hsize)
        except KeyError as e:
            if not (cls.__flexible__ and "tagged field" in str(e)):
                raise
            # kio refuses a tag it does not know; Kafka skips it (KIP-482): parse the body without them
            body, bsize = entity_reader(cls)(strip_unknown_tags(cls, frame, hsize), 0)
    except Exception as e:  # noqa: BLE001 - kio raises several kinds on bad bytes
        raise MalformedRequest(f"API {api_key} v{version}: {type(e).__name__}: {e}") from None
    # Bytes after the request are ignored, as Kafka's broker ignores them (librdkafka's Metadata v12
    # carries three).
    return RequestHeader(api_key, version, corr, getattr(header, "client_id", None)), body


def _v1_client_id(frame: bytes) -> tuple[str | None, int]:
    """Request header v1's client id and the header's size (for the versions kio has no schema of)."""
    if len(frame) < _HEAD.size + 2:
        raise MalformedRequest("a request header without its client id")
    (n,) = struct.unpack_from(">h", frame, _HEAD.size)
    end = _HEAD.size + 2 + max(n, 0)
    if end > len(frame):
        raise MalformedRequest("the client id runs past the request")
    return (None if n < 0 else frame[_HEAD.size + 2:end].decode("utf-8", "replace")), end


def response_class(api_key: int, version: int):
    return load_response_schema(api_key, version)


def parse_response(frame: bytes, api_key: int, version: int):
    """kio's response entity from a whole response frame (size prefix included), as a relay reads a
    coordinator's answer; ValueError when it does not parse."""
    cls = load_response_schema(api_key, version)
    pos = _SIZE.size + 4 + (1 if cls.__flexible__ and api_key != API_VERSIONS else 0)
    try:
        return entity_reader(cls)(frame, pos)[0]
    except Exception as e:  # noqa: BLE001 - kio raises several kinds on bad bytes
        raise ValueError(f"API {api_key} v{version} response: {type(e).__name__}: {e}") from None


def encode_response(api_key: int, version: int, correlation_id: int, response) -> bytes:
    cls = type(response)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(struct.pack(">i", correlation_id))
    if cls.__flexible__ and api_key != API_VERSIONS:
        buf.write(b"\0")   # response header v1: no tagged fields
    entity_writer(cls)(buf, response)
    data = bytearray(buf.getvalue())
    _SIZE.pack_into(data, 0, len(data) - 4)
    return bytes(data)


# -- building entities from plain values ------------------------------------------------------------
@functools.cache
def _fields(cls):
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


def _entity_arg(t):
    """The entity class inside `X`, `X | None`, `tuple[X, ...]` or `tuple[X, ...] | None`, else None."""
    if dataclasses.is_dataclass(t):
        return t
    for a in typing.get_args(t):
        if a is type(None) or a is Ellipsis:
            continue
        found = _entity_arg(a)
        if found is not None:
            return found
    return None


def _zero(f, t):
    kt = f.metadata.get("kafka_type")
    if typing.get_origin(t) is tuple or (kt is None and _entity_arg(t) is not None and
                                         any(typing.get_origin(a) is tuple for a in typing.get_args(t))):
        return ()
    if kt in ("string",):
        return ""
    if kt in ("bool",):
        return False
    if kt == "uuid":
        return ZERO_UUID
    if kt == "records" or kt == "bytes":
        return None if type(None) in typing.get_args(t) else b""
    if kt == "error_code":
        return ErrorCode.none
    if kt and kt.startswith("timedelta"):
        return datetime.timedelta(0)
    if kt and kt.startswith("datetime"):
        return None
    if kt is None and _entity_arg(t) is not None:
        return make(_entity_arg(t), {})
    return 0


def _coerce(f, t, v):
    kt = f.metadata.get("kafka_type")
    if v is None:
        return None
    if kt == "error_code":
        return v if isinstance(v, ErrorCode) else ErrorCode(int(v))
    if kt and kt.startswith("timedelta") and isinstance(v, int):
        return datetime.timedelta(milliseconds=v)
    if kt and kt.startswith("datetime") and isinstance(v, int):   # epoch milliseconds; -1 (none) too
        return datetime.datetime.fromtimestamp(v / 1000, tz=datetime.timezone.utc)
    sub = _entity_arg(t)
    if sub is not None:
        if isinstance(v, (list, tuple)):
            return tuple(make(sub, x) if isinstance(x, dict) else x for x in v)
        if isinstance(v, dict):
            return make(sub, v)
    if isinstance(v, list):
        return tuple(v)
    return v


def make(cls, values: dict):
    kw = {}
    for f, t in _fields(cls):
        if f.name in values:
            kw[f.name] = _coerce(f, t, values[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = _zero(f, t)
    return cls(**kw)


def nested(cls, *path: str):
    """The entity class at `path` of field names below `cls` (for building parts of a response)."""
    for name in path:
        cls = _entity_arg(dict((f.name, t) for f, t in _fields(cls))[name])
    return cls
