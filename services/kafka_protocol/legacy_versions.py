"""Request versions Kafka 4.0 removed (KIP-896) and earlier releases served, read and written through
kafka-python's copy of Kafka's own JSON request schemas (kio's generated schemas start where 4.0 does).

Guarantees: `REMOVED_IN_4_0` is the one table of those versions: each (API
key, version range) read here and refused by 4.0 (its lowest version is the
one after the range, `lowest_in_4_0`): Produce v0-v2, Fetch v0-v3 and
ListOffsets v0, the versions whose records are in message format v0/v1 or
whose answer is the pre-KIP-79 offset list; OffsetCommit v0-v1, OffsetFetch
v0, CreateTopics v0-v1 and DeleteTopics v0; DescribeConfigs v0 and the ACL
APIs' v0 (0.11 served no other version of them). `parse_body` reads such a
request's body into an object with the attribute names kio gives later
versions (snake case of Kafka's field names; a field the version lacks reads
as the schema's default), or raises `MalformedRequest` for bytes Kafka's
parser refuses: cut short, or a null where the version's schema has no
nullable field (a string, an array, or an element of a list of strings);
`encode_response` writes a handler's plain values (dicts and lists, as for
kio) as that version's response frame, fields the version lacks left out.
kafka-python is imported on the first such request, so a listener that never
sees one never loads it.
"""
from __future__ import annotations

import functools
import importlib
import struct

from services.kafka_protocol.codec import MalformedRequest

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 2, 8, 9, 19, 20
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS = 29, 30, 31, 32
# API key -> (lowest, highest) version Kafka 4.0 no longer serves (KIP-896), served here to older releases
REMOVED_IN_4_0 = {PRODUCE: (0, 2), FETCH: (0, 3), LIST_OFFSETS: (0, 0), OFFSET_COMMIT: (0, 1), OFFSET_FETCH: (0, 0),
                  CREATE_TOPICS: (0, 1), DELETE_TOPICS: (0, 0), DESCRIBE_ACLS: (0, 0), CREATE_ACLS: (0, 0),
                  DELETE_ACLS: (0, 0), DESCRIBE_CONFIGS: (0, 0)}
# API key -> (kafka-python module, message name)
_SCHEMAS = {PRODUCE: ("producer", "Produce"), FETCH: ("consumer", "Fetch"), LIST_OFFSETS: ("consumer", "ListOffsets"),
            OFFSET_COMMIT: ("consumer", "OffsetCommit"), OFFSET_FETCH: ("consumer", "OffsetFetch"),
            CREATE_TOPICS: ("admin", "CreateTopics"), DELETE_TOPICS: ("admin", "DeleteTopics"),
            DESCRIBE_ACLS: ("admin", "DescribeAcls"), CREATE_ACLS: ("admin", "CreateAcls"),
            DELETE_ACLS: ("admin", "DeleteAcls"), DESCRIBE_CONFIGS: ("admin", "DescribeConfigs")}
_SIZE_CORR = struct.Struct(">ii")


def is_legacy(api_key: int, version: int) -> bool:
    lo_hi = REMOVED_IN_4_0.get(api_key)
    return lo_hi is not None and lo_hi[0] <= version <= lo_hi[1]


def lowest_in_4_0(api_key: int, lowest: int) -> int:
    """4.0's lowest version of an API whose lowest the lab serves is `lowest`."""
    lo_hi = REMOVED_IN_4_0.get(api_key)
    return lowest if lo_hi is None else max(lowest, lo_hi[1] + 1)


@functools.cache
def _classes(api_key: int):
    module, name = _SCHEMAS[api_key]
    m = importlib.import_module(f"kafka.protocol.{module}")
    return getattr(m, name + "Request"), getattr(m, name + "Response")


def _null_field(obj, version: int) -> str | None:
    """The name of the first field of `obj` (recursively) that is null where the version does not allow it."""
    for name, f in type(obj).fields.items():
        if not f.for_version_q(version):
            continue
        value = getattr(obj, name)
        if value is None:
            if not f.nullable_for_version_q(version):
                return name
        elif f.is_struct_array():
            for item in value:
                bad = _null_field(item, version)
                if bad:
                    return f"{name}.{bad}"
        elif f.is_struct():
            bad = _null_field(value, version)
            if bad:
                return f"{name}.{bad}"
        elif f.is_array() and any(x is None for x in value):
            return f"{name}[]"
    return None


def parse_body(api_key: int, version: int, frame: bytes, offset: int):
    """The request body that starts at `offset` of `frame` (after a v1 request header)."""
    from kafka.protocol.api_message import ApiMessage
    request_cls, _ = _classes(api_key)
    body = memoryview(frame)[offset:]
    try:
        req = request_cls.decode(body, version=version)
        # the schema reader cuts a field short at the end of the bytes instead of failing: written again,
        # the request must be what was sent (bytes after it are ignored, as Kafka ignores them); written by
        # ApiMessage's own encode, which a message's override (DeleteTopics') cannot bypass on a decoded one
        again = bytes(ApiMessage.encode(req))
        complete = body[:len(again)] == again
        null = _null_field(req, version)
    except Exception as e:  # noqa: BLE001 - the schema reader raises several kinds on bad bytes
        raise MalformedRequest(f"API {api_key} v{version}: {type(e).__name__}: {e}") from None
    if not complete:
        raise MalformedRequest(f"API {api_key} v{version}: the request is cut short")
    if null:
        raise MalformedRequest(f"API {api_key} v{version}: {null} is null, which the version does not allow")
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
