"""The brokers' dynamic cluster default (`/config/brokers/<default>`) as the controller follows it: a
ZooKeeper-mode Kafka controller runs in a broker and reads that broker's reconfigured log defaults
(DynamicLogConfig), so a dynamic default applies to its rules.

Guarantees: `broker_config_changed` (on the change-notification thread, or at start) reads the default
entity and hands the configs the controller's rules read (`unclean.leader.election.enable`,
`min.insync.replicas`) to the event thread as one ClusterDefaultsChange; other broker entities are
ignored (the lab's controller is no broker). `apply` (on the event thread) sets them in the context,
under each topic's own configs, and when unclean election becomes allowed for a topic that had it off,
the active controller elects the offline partitions at once (Kafka's UncleanLeaderElectionEnable).
"""
from __future__ import annotations

import logging

from services.common import entity_configs
from services.controller import controller_events as ev

log = logging.getLogger(__name__)
CLUSTER_DEFAULT = "<default>"
LOG_DEFAULTS = frozenset({"unclean.leader.election.enable", "min.insync.replicas"})


def broker_config_changed(c, name: str) -> None:
    if name == CLUSTER_DEFAULT:
        config, _ = entity_configs.read(c.zk, "brokers", CLUSTER_DEFAULT)
        c.events.put(ev.ClusterDefaultsChange(tuple(sorted((k, v) for k, v in config.items()
                                                           if k in LOG_DEFAULTS))))


def apply(c, config: dict[str, str]) -> None:
    with c.lock:
        before = {t: c.ctx.unclean_allowed(t) for t in c.ctx.assignments}
        c.ctx.cluster_defaults = config
        now_unclean = [t for t, was in before.items() if not was and c.ctx.unclean_allowed(t)]
    log.info("the brokers' cluster default is now %s", config)
    if c.active and now_unclean:
        log.info("unclean leader election is now allowed for %d topics: electing their offline partitions",
                 len(now_unclean))
        c.state_changed()
