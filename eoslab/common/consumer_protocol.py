"""Kafka's consumer protocol bytes (ConsumerProtocolSubscription and ConsumerProtocolAssignment), which
a consumer group's members embed in JoinGroup and SyncGroup.

Guarantees: `subscription_topics` reads the topics of every version (0-3: later versions only add
fields after the topics) and `assignment_partitions` the partitions of every assignment version;
each raises ProtocolError on truncated or inconsistent bytes, never reads past them. The encoders
write version 0 with no user data. The group coordinator never needs these to pass a Kafka member's
bytes on (it keeps them as sent); they translate for the lab's own clients, which speak topic and
partition lists over gRPC.
"""
from __future__ import annotations

import struct


class ProtocolError(ValueError):
    """Bytes that are not a consumer protocol subscription or assignment."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        st = struct.Struct(fmt)
        if self.pos + st.size > len(self.data):
            raise ProtocolError("truncated consumer protocol bytes")
        v = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v[0] if len(v) == 1 else v

    def string(self) -> str:
        n = self.take(">h")
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("bad string in consumer protocol bytes")
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def count(self) -> int:
        n = self.take(">i")
        if n < 0 or n > len(self.data):
            raise ProtocolError("bad array length in consumer protocol bytes")
        return n


def subscription_topics(metadata: bytes) -> list[str]:
    r = _Reader(bytes(metadata or b""))
    r.take(">h")   # version
    return [r.string() for _ in range(r.count())]


def encode_subscription(topics: list[str]) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    out += struct.pack(">i", -1)   # no user data
    return bytes(out)


def assignment_partitions(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    r = _Reader(bytes(data))
    r.take(">h")
    out = []
    for _ in range(r.count()):
        topic = r.string()
        out += [(topic, r.take(">i")) for _ in range(r.count())]
    return out


def encode_assignment(parts) -> bytes:
    """Version 0 from (topic, partition) pairs or objects with .topic and .partition."""
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        t, p = (tp[0], tp[1]) if isinstance(tp, (tuple, list)) else (tp.topic, tp.partition)
        by_topic.setdefault(t, []).append(int(p))
    out = bytearray(struct.pack(">hi", 0, len(by_topic)))
    for t, ps in by_topic.items():
        b = t.encode()
        out += struct.pack(">h", len(b)) + b + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p)
                                                                                      for p in sorted(ps))
    out += struct.pack(">i", -1)
    return bytes(out)
