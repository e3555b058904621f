"""Topic names and topic configs: the rules both sides check (Kafka's common.internals.Topic and
the topic configs LogConfig validates), in the common module clients and services import.

Guarantees: `validate_topic_name` refuses what Kafka refuses (empty, longer than 249, "." or "..",
characters outside [a-zA-Z0-9._-]); `validate_configs` refuses an unknown topic config, a value of
the wrong type and one outside Kafka's bounds (the table: eoslab.common.topic_configs). Each
answers None when the input is fine, else one line saying why.
"""
from __future__ import annotations

import base64
import uuid

from eoslab.common.topic_configs import validate as _validate_topic_configs


def new_topic_id() -> str:
    """A new topic id as Kafka writes it in ZooKeeper (Uuid.toString: 22 characters of URL-safe base64)."""
    while True:
        u = uuid.uuid4()
        if u.int != 0:                                      # Kafka's ZERO_UUID means "no id"
            return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def topic_id_text(u) -> str:
    """Kafka's Uuid string of a UUID ("" for the zero UUID: no id)."""
    return "" if u is None or u.int == 0 else base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def topic_id_uuid(text: str | None) -> uuid.UUID:
    """The UUID of a topic id string (Kafka's Uuid.fromString); the zero UUID for none or a bad one."""
    try:
        raw = base64.urlsafe_b64decode((text or "") + "==")
        return uuid.UUID(bytes=raw) if len(raw) == 16 else uuid.UUID(int=0)
    except ValueError:
        return uuid.UUID(int=0)


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
