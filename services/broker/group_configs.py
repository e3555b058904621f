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
  (services.common.entity_configs: `/config/groups/<group>`, written conditionally on the version
  read, so concurrent changes on two brokers lose nothing, with a change notification);
- every broker caches them (`load` at start) and reads a group's again when a change notification
  names it (`changed`, called by the broker's one `/config/changes` listener:
  services.common.change_notifications), so the group's coordinator applies a new session timeout at
  the member's next heartbeat and tells it the new heartbeat interval there.
"""
from __future__ import annotations

import logging
import threading

from kazoo.exceptions import KazooException, ZookeeperError

from eoslab.common import config_ops
from eoslab.common.errors import E
from services.common import entity_configs

log = logging.getLogger(__name__)
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
NAMES = (HEARTBEAT, SESSION)
INT = 3                        # DescribeConfigs' config type
GROUP_CONFIG, DEFAULT_CONFIG = config_ops.GROUP_CONFIG, config_ops.DEFAULT_CONFIG


class GroupConfigs:
    def __init__(self, zk, session_timeout_ms: int, heartbeat_interval_ms: int, session_bounds: tuple[int, int],
                 heartbeat_bounds: tuple[int, int]):
        self.zk = zk
        self.defaults = {SESSION: session_timeout_ms, HEARTBEAT: heartbeat_interval_ms}
        self.bounds = {SESSION: session_bounds, HEARTBEAT: heartbeat_bounds}
        self._cache: dict[str, dict[str, int]] = {}
        self._reload_lock = threading.Lock()

    def load(self, raise_errors: bool = False) -> None:
        """Every group's configs, read again (at start, with `raise_errors`, so the caller can retry)."""
        with self._reload_lock:
            try:
                self._cache = {group_id: own for group_id in entity_configs.names(self.zk, "groups")
                               if (own := _ints(self._read(group_id)[0]))}
            except (KazooException, ZookeeperError) as e:
                if raise_errors:
                    raise
                log.warning("group configs not loaded from ZooKeeper (%s): keeping the cached", e)

    def changed(self, group_id: str) -> None:
        """A change notification named the group: its configs, read again (a ZooKeeper error propagates,
        so the notification is retried)."""
        with self._reload_lock:
            own = _ints(self._read(group_id)[0])
            cache = dict(self._cache)
            if own:
                cache[group_id] = own
            else:
                cache.pop(group_id, None)
            self._cache = cache

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
            try:
                new = config_ops.apply_ops(config, ops, False, lambda _name: None)     # no list configs
            except config_ops.ConfigOpRefused as e:
                return e.code, str(e)
            why = self._invalid(new)
            if why:
                return E.INVALID_CONFIG, why
            if validate_only or new == config:
                return E.NONE, None
            if entity_configs.write(self.zk, "groups", group_id, new, version):
                self.changed(group_id)
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


def _ints(config: dict) -> dict[str, int]:
    return {k: int(v) for k, v in config.items() if k in NAMES}
