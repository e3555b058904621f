"""Topic names and topic configs: the rules both sides check (Kafka's common.internals.Topic and
the topic configs LogConfig validates), in the common module clients and services import.

Guarantees: `validate_topic_name` refuses what Kafka refuses (empty, longer than 249, "." or "..",
characters outside [a-zA-Z0-9._-]); `validate_configs` refuses an unknown topic config, a value of
the wrong type and one outside Kafka's bounds (the table: eoslab.common.topic_configs). Each
answers None when the input is fine, else one line saying why.
"""
from __future__ import annotations

from eoslab.common.topic_configs import validate as _validate_topic_configs


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
    """Kafka's LogConfig.validate over eoslab.common.topic_configs' table: None, or one line."""
    return _validate_topic_configs(configs)
