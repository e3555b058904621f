"""DynamicBrokerConfig: a broker's dynamic configs (Kafka's DynamicBrokerConfig, ZooKeeper mode), kept in
ZooKeeper per broker (`/config/brokers/<id>`) and as the cluster's default (`/config/brokers/<default>`).

Guarantees, each Kafka's rule:
- only the names of eoslab.common.dynamic_broker_configs.DYNAMIC are taken ("Cannot update these configs
  dynamically: Set(x)", INVALID_REQUEST); the per-broker ones are refused at the cluster default
  ("Cannot update these configs at default cluster level, broker id must be specified: Set(x)",
  INVALID_REQUEST); a value Kafka would not parse is INVALID_CONFIG; a refused request changes nothing;
- AlterConfigs replaces the entity's whole set; IncrementalAlterConfigs SETs, DELETEs, and APPENDs to
  or SUBTRACTs from list configs; validate_only writes nothing;
- the value in force is the broker's own, else the cluster default, else the static setting:
  `overrides()` gives name -> (value, source), DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG;
- every broker loads both at start, reads them again when a change notification names its own id or
  the default (`changed`, called by the broker's one `/config/changes` listener:
  services.common.change_notifications) and at once after its own change, and calls `apply(overrides)`
  when they changed.
"""
from __future__ import annotations

import logging
import threading

from kazoo.exceptions import KazooException, ZookeeperError

from eoslab.common import config_ops
from eoslab.common import dynamic_broker_configs as d
from eoslab.common.errors import E
from services.common import entity_configs

log = logging.getLogger(__name__)
DEFAULT_ENTITY = "<default>"
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = config_ops.DYNAMIC_BROKER_CONFIG, config_ops.DYNAMIC_DEFAULT_BROKER_CONFIG


class DynamicBrokerConfig:
    def __init__(self, zk, broker_id: int, apply=lambda overrides: None):
        self.zk, self.broker_id, self.apply = zk, broker_id, apply
        self._overrides: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read both entities again (at start); a ZooKeeper error keeps the last."""
        try:
            self.reload()
        except (KazooException, ZookeeperError) as e:
            log.warning("dynamic broker configs not loaded (%s): keeping the last", e)

    def changed(self, name: str) -> None:
        """A change notification named broker entity `name`; other brokers' own configs are not ours."""
        if name in (DEFAULT_ENTITY, str(self.broker_id)):
            self.reload()

    def reload(self) -> None:
        with self._lock:
            default, _ = entity_configs.read(self.zk, "brokers", DEFAULT_ENTITY)
            own, _ = entity_configs.read(self.zk, "brokers", str(self.broker_id))
            fresh = {n: (v, DYNAMIC_DEFAULT_BROKER_CONFIG) for n, v in default.items() if n in d.DYNAMIC}
            fresh.update({n: (v, DYNAMIC_BROKER_CONFIG) for n, v in own.items() if n in d.DYNAMIC})
            if fresh != self._overrides:
                self._overrides = fresh
                # under the lock: two reloads (a request's and the listener's) apply in the order they read
                self.apply({n: v for n, (v, _) in fresh.items()})

    def overrides(self) -> dict[str, tuple[str, int]]:
        return dict(self._overrides)

    def entity(self, name: str) -> dict[str, str]:
        return entity_configs.read(self.zk, "brokers", name or DEFAULT_ENTITY)[0]

    def alter(self, name: str, ops: list[tuple[str, int, str | None]], incremental: bool,
              validate_only: bool) -> tuple[int, str | None]:
        """`name`: this broker's id or "" (the cluster default). (error, message)."""
        entity = name or DEFAULT_ENTITY
        names = sorted({n for n, _, _ in ops})
        unknown = [n for n in names if n not in d.DYNAMIC]
        if unknown:
            return E.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(unknown)})"
        if entity == DEFAULT_ENTITY and (per := [n for n in names if n in d.PER_BROKER]):
            return E.INVALID_REQUEST, ("Cannot update these configs at default cluster level, broker id must be "
                                       f"specified: Set({', '.join(per)})")
        while True:
            current, version = entity_configs.read(self.zk, "brokers", entity)
            try:
                new = config_ops.apply_ops(current, ops, not incremental, _list_default)
            except config_ops.ConfigOpRefused as e:
                return e.code, str(e)
            for n, v in new.items():
                if (why := d.check(n, v)) is not None:
                    return E.INVALID_CONFIG, why
            if validate_only or new == current:
                return E.NONE, None
            if entity_configs.write(self.zk, "brokers", entity, new, version):
                self.reload()
                return E.NONE, None                        # else changed under us: read again


def _list_default(name: str) -> str | None:
    """A list config's default (ConfigAdminManager: a list not set here starts from it); None: not a list."""
    if d.DYNAMIC.get(name) != d.LIST:
        return None
    return str(d.LOG_DEFAULTS[name].default) if name in d.LOG_DEFAULTS else ""
