"""GroupConfigs: a consumer group's own configs (Kafka 4.0's GroupConfig for KIP-848 groups), kept in
ZooKeeper and applied by the group coordinator.

Guarantees, each Kafka's rule (GroupConfig, ConfigHelper):
- the configs are `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`, INT; a group
  without its own value takes the broker's `group.consumer.session.timeout.ms` /
  `group.consumer.heartbeat.interval.ms`; DescribeConfigs lists both, the group's own with source
  GROUP_CONFIG, a default with DEFAULT_CONFIG (any group name but the empty one, as Kafka);
- IncrementalAlterConfigs SETs or DELETEs them (APPEND / SUBTRACT are refused: not list configs);
  the group's configs after the change are validated as a whole: a name Kafka 4.0 does not know
  for a consumer group ("Unknown group config name: x"), a value that is not an INT, a session timeout
  outside group.consumer.min/max.session.timeout.ms, a heartbeat interval outside
  group.consumer.min/max.heartbeat.interval.ms, or a session timeout not above the heartbeat interval
  is INVALID_CONFIG and changes nothing; validate_only changes nothing either;
- layout (the lab's; Kafka 4.0 keeps them as KRaft config records): the group's entity configs
  (services.broker.entity_configs: `/config/groups/<group>`, written conditionally on the version
  read, so concurrent changes on two brokers lose nothing, with a change notification);
- every broker caches them and reloads on a change notification, so the group's coordinator applies a
  new session timeout at the member's next heartbeat and tells it the new heartbeat interval there.
"""
from __future__ import annotations

import logging
import threading

from kazoo.exceptions import KazooException, ZookeeperError

from eoslab.common.errors import E
from services.broker import entity_configs

log = logging.getLogger(__name__)
CHANGES = entity_configs.CHANGES
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
NAMES = (HEARTBEAT, SESSION)
SET, DELETE = 0, 1
INT = 3                        # DescribeConfigs' config type
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5


class GroupConfigs:
    def __init__(self, zk, session_timeout_ms: int, heartbeat_interval_ms: int, session_bounds: tuple[int, int],
                 heartbeat_bounds: tuple[int, int]):
        self.zk = zk
        self.defaults = {SESSION: session_timeout_ms, HEARTBEAT: heartbeat_interval_ms}
        self.bounds = {SESSION: session_bounds, HEARTBEAT: heartbeat_bounds}
        self._cache: dict[str, dict[str, int]] = {}
        self._reload_lock = threading.Lock()

    def start(self) -> None:
        self.zk.ensure_path(CHANGES)
        self.zk.ChildrenWatch(CHANGES, lambda _children: threading.Thread(
            target=self.reload, name="group-config-reload", daemon=True).start(), send_event=False)
        self.reload()

    def reload(self) -> None:
        with self._reload_lock:
            try:
                fresh = {}
                for group_id in entity_configs.names(self.zk, "groups"):
                    config, _ = self._read(group_id)
                    if config:
                        fresh[group_id] = {k: int(v) for k, v in config.items() if k in NAMES}
                self._cache = fresh
            except (KazooException, ZookeeperError) as e:
                log.warning("group configs not reloaded from ZooKeeper (%s): keeping the cached", e)

    def of(self, group_id: str) -> dict[str, int]:
        """The group's own configs (cached)."""
        return self._cache.get(group_id, {})

    def value(self, group_id: str, name: str) -> int:
        return self.of(group_id).get(name, self.defaults[name])

    # -- DescribeConfigs / IncrementalAlterConfigs --------------------------------------------------
    def describe(self, group_id: str, keys, synonyms: bool) -> list[dict]:
        own = self._read(group_id)[0]
        out = []
        for name in NAMES:
            if keys is not None and name not in keys:
                continue
            value = str(own.get(name, self.defaults[name]))
            source = GROUP_CONFIG if name in own else DEFAULT_CONFIG
            out.append({"name": name, "value": value, "read_only": False, "config_source": source,
                        "is_sensitive": False, "config_type": INT, "documentation": None,
                        "synonyms": [{"name": name, "value": value, "source": source}] if synonyms else []})
        return out

    def alter(self, group_id: str, ops: list[tuple[str, int, str | None]], validate_only: bool) -> tuple[int, str | None]:
        """ops: (name, operation, value). (error, message)."""
        while True:
            config, version = self._read(group_id)
            new = dict(config)
            for name, op, value in ops:
                if op == SET:
                    new[name] = value
                elif op == DELETE:
                    new.pop(name, None)
                else:
                    return E.INVALID_CONFIG, (f"Config value append is not allowed for config key {name} since the "
                                              "config type is not a list")
            why = self._invalid(new)
            if why:
                return E.INVALID_CONFIG, why
            if validate_only or new == config:
                return E.NONE, None
            if entity_configs.write(self.zk, "groups", group_id, new, version):
                self.reload()
                return E.NONE, None                        # else changed under us: read again

    def _invalid(self, config: dict) -> str | None:
        for name in config:
            if name not in NAMES:
                return f"Unknown group config name: {name}"
        values = dict(self.defaults)
        for name, raw in config.items():
            try:
                values[name] = int(str(raw).strip())
            except ValueError:
                return f"Invalid value {raw} for configuration {name}: Not a number of type INT"
        for name, bound_name in ((HEARTBEAT, "heartbeat.interval.ms"), (SESSION, "session.timeout.ms")):
            lo, hi = self.bounds[name]
            if values[name] < lo:
                return f"{name} must be greater than or equal to group.consumer.min.{bound_name}"
            if values[name] > hi:
                return f"{name} must be less than or equal to group.consumer.max.{bound_name}"
        if values[SESSION] <= values[HEARTBEAT]:
            return f"{SESSION} must be greater than {HEARTBEAT}"
        return None

    def _read(self, group_id: str) -> tuple[dict, int | None]:
        return entity_configs.read(self.zk, "groups", group_id)
