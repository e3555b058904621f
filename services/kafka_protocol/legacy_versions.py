"""Request versions Kafka 4.0 removed (KIP-896) and earlier releases served, read and written through
kafka-python's copy of Kafka's own JSON request schemas (kio's generated schemas start where 4.0 does).

Guarantees: `LEGACY` names every (API key, version range) read here: Produce
v0-v2, Fetch v0-v3 and ListOffsets v0, the versions whose records are in
message format v0/v1 or whose answer is the pre-KIP-79 offset list, and
DescribeConfigs v0 and the ACL APIs' v0 (0.11 served no other version of them).
`parse_body` reads such a request's body into an object with the attribute
names kio gives later versions (snake case of Kafka's field names; a field
the version lacks reads as the schema's default), or raises
`MalformedRequest`; `encode_response` writes a handler's plain values (dicts
and lists, as for kio) as that version's response frame, fields the version
lacks left out. kafka-python is imported on the first such request, so a
listener that never sees one never loads it.
"""
from __future__ import annotations

import functools
import struct

from services.kafka_protocol.codec import MalformedRequest

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS = 29, 30, 31, 32
LEGACY = {PRODUCE: (0, 2), FETCH: (0, 3), LIST_OFFSETS: (0, 0), DESCRIBE_ACLS: (0, 0), CREATE_ACLS: (0, 0),
          DELETE_ACLS: (0, 0), DESCRIBE_CONFIGS: (0, 0)}
_ADMIN = {DESCRIBE_ACLS: "DescribeAcls", CREATE_ACLS: "CreateAcls", DELETE_ACLS: "DeleteAcls",
          DESCRIBE_CONFIGS: "DescribeConfigs"}
_SIZE_CORR = struct.Struct(">ii")


def is_legacy(api_key: int, version: int) -> bool:
    lo_hi = LEGACY.get(api_key)
    return lo_hi is not None and lo_hi[0] <= version <= lo_hi[1]


@functools.cache
def _classes(api_key: int):
    if api_key == PRODUCE:
        from kafka.protocol.producer import ProduceRequest, ProduceResponse
        return ProduceRequest, ProduceResponse
    if api_key == FETCH:
        from kafka.protocol.consumer import FetchRequest, FetchResponse
        return FetchRequest, FetchResponse
    if api_key in _ADMIN:
        from kafka.protocol import admin
        return getattr(admin, _ADMIN[api_key] + "Request"), getattr(admin, _ADMIN[api_key] + "Response")
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
    return ListOffsetsRequest, ListOffsetsResponse


def parse_body(api_key: int, version: int, frame: bytes, offset: int):
    """The request body that starts at `offset` of `frame` (after a v1 request header)."""
    request_cls, _ = _classes(api_key)
    body = memoryview(frame)[offset:]
    try:
        req = request_cls.decode(body, version=version)
        # the schema reader cuts a field short at the end of the bytes instead of failing: written again,
        # the request must be what was sent (bytes after it are ignored, as Kafka ignores them)
        again = bytes(req.encode())
        complete = body[:len(again)] == again
    except Exception as e:  # noqa: BLE001 - the schema reader raises several kinds on bad bytes
        raise MalformedRequest(f"API {api_key} v{version}: {type(e).__name__}: {e}") from None
    if not complete:
        raise MalformedRequest(f"API {api_key} v{version}: the request is cut short")
    return req


def _build(cls, values: dict, version: int):
    fields = cls.fields
    kw = {}
    for name, value in values.items():
        field = fields.get(name)
        if field is None or not field.for_version_q(version):
            continue
        if field.is_struct_array():
            value = [_build(field.data_class, v, version) for v in value or []]
        elif field.is_struct():
            value = _build(field.data_class, value, version)
        kw[name] = value
    return cls(version=version, **kw)


def encode_response(api_key: int, version: int, correlation_id: int, values: dict) -> bytes:
    """The whole response frame (size prefix, v0 response header, body)."""
    _, response_cls = _classes(api_key)
    body = bytes(_build(response_cls, values, version).encode())
    return _SIZE_CORR.pack(4 + len(body), correlation_id) + body
