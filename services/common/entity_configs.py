"""Entity configs in ZooKeeper as Kafka's ZooKeeper-mode AdminZkClient keeps them: `/config/<type>/<sanitized
name>` holding `{"version": 1, "config": {name: value}}`, and a sequential `/config/changes/config_change_`
naming `<type>/<sanitized name>` after each change (the notification brokers watch).

Guarantees: `read` returns the entity's configs and the node's version (None: no node); `write` is
conditional on that version (a create when there was no node) and answers False, writing nothing,
when another writer changed the node first, so a caller that reads again and retries loses no
concurrent change; `sanitize` is Kafka's Sanitizer.sanitize, applied where Kafka's AdminZkClient
applies it (users, clients, and the lab's groups), not to broker ids and `<default>` or topic names,
which Kafka writes as they are.
"""
from __future__ import annotations

import json

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

CONFIG_ROOT, CHANGES = "/config", "/config/changes"
UNSANITIZED = frozenset({"brokers", "topics"})


def sanitize(name: str) -> str:
    """URL encoding in which only ASCII letters, digits, '-', '.' and '_' stay (Kafka's Sanitizer)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-._") else
                   "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def desanitize(node: str) -> str:
    from urllib.parse import unquote
    return unquote(node)


def node_name(entity_type: str, name: str) -> str:
    return name if entity_type in UNSANITIZED else sanitize(name)


def path(entity_type: str, name: str) -> str:
    return f"{CONFIG_ROOT}/{entity_type}/{node_name(entity_type, name)}"


def read(zk, entity_type: str, name: str) -> tuple[dict, int | None]:
    try:
        data, stat = zk.get(path(entity_type, name))
    except NoNodeError:
        return {}, None
    return dict(json.loads(data or b"{}").get("config", {})), stat.version


def names(zk, entity_type: str) -> list[str]:
    try:
        children = zk.get_children(f"{CONFIG_ROOT}/{entity_type}")
        return children if entity_type in UNSANITIZED else [desanitize(n) for n in children]
    except NoNodeError:
        return []


def write(zk, entity_type: str, name: str, config: dict, version: int | None) -> bool:
    data = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
    try:
        if version is None:
            zk.create(path(entity_type, name), data, makepath=True)
        else:
            zk.set(path(entity_type, name), data, version=version)
    except (BadVersionError, NodeExistsError, NoNodeError):
        return False
    note = json.dumps({"version": 2, "entity_path": f"{entity_type}/{node_name(entity_type, name)}"}).encode()
    zk.create(f"{CHANGES}/config_change_", note, sequence=True, makepath=True)
    return True
