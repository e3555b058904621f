"""Topic names and topic configs: the rules both sides check (Kafka's common.internals.Topic and
the topic configs LogConfig validates), in the common module clients and services import.

Guarantees: `validate_topic_name` refuses what Kafka refuses (empty, longer than 249, "." or "..",
characters outside [a-zA-Z0-9._-]); `validate_configs` refuses an unknown topic config, a value of
the wrong type and one outside Kafka's bounds. Each answers None when the input is fine, else one
line saying why.
"""
from __future__ import annotations

TOPIC_CONFIG_KEYS = {
    "flush.messages": int,
    "flush.ms": int,
    "max.message.bytes": int,
    "min.insync.replicas": int,
    "segment.bytes": int,
    "unclean.leader.election.enable": lambda v: {"true": True, "false": False}[v.lower()],
}
INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1
# Kafka's bounds (LogConfig: INT configs; segment.bytes at least 14 bytes, one legacy record's overhead;
# the LONG configs flush.messages at least 1 and flush.ms at least 0).
TOPIC_CONFIG_RANGES = {
    "flush.messages": (1, INT64_MAX),
    "flush.ms": (0, INT64_MAX),
    "max.message.bytes": (1, INT32_MAX),
    "min.insync.replicas": (1, INT32_MAX),
    "segment.bytes": (14, INT32_MAX),
}


def validate_topic_name(name: str) -> str | None:
    if not name or len(name) > 249:
        return "topic name must be 1 to 249 characters"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    bad = [c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))]
    if bad:
        return f"topic name {name!r} has illegal characters (allowed: a-z A-Z 0-9 . _ -)"
    return None


def validate_configs(configs: dict[str, str]) -> str | None:
    for k, v in configs.items():
        conv = TOPIC_CONFIG_KEYS.get(k)
        if conv is None:
            return f"unknown topic config {k!r}"
        try:
            val = conv(v)
        except (ValueError, KeyError):
            return f"invalid value {v!r} for {k}"
        low, high = TOPIC_CONFIG_RANGES.get(k, (None, None))
        if low is not None and not low <= val <= high:
            return f"{k} must be between {low} and {high}, got {v}"
    return None
