"""A topic's configs changed by AlterConfigs or IncrementalAlterConfigs (Kafka's
ZkAdminManager.alterConfigs / incrementalAlterConfigs with AdminZkClient.changeTopicConfig, ZooKeeper
mode, applied by the active controller).

Guarantees: the operations are applied to the topic's current configs in order (SET, DELETE, and
APPEND / SUBTRACT on list configs only, as Kafka's ConfigAdminManager.prepareIncrementalConfigs);
AlterConfigs replaces the whole set. The result is validated as a whole by Kafka's topic-config rules
(eoslab.common.topic_configs): an unknown name, a bad value or an operation a config does not take is
INVALID_CONFIG and changes nothing; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. With
validate_only nothing is written. Otherwise /config/topics/<topic> is written in one ZooKeeper
transaction fenced by the controller epoch, then the controller's copy changes and every broker gets
UpdateMetadata with it (brokers apply it to the topic's partitions at once); a topic whose
unclean.leader.election.enable is now true gets its offline partitions elected as for a broker loss.
"""
from __future__ import annotations

import logging

from eoslab.common import config_ops
from eoslab.common import topic_configs as tc
from eoslab.common.errors import E
from eoslab.v1 import controller_pb2
from services.common import zk_paths
from services.controller.context import check_fenced

log = logging.getLogger(__name__)


class ConfigRefused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def apply_ops(current: dict[str, str], change: controller_pb2.TopicConfigChange) -> dict[str, str]:
    """The topic's configs after `change`, validated; raises ConfigRefused."""
    for o in change.ops:
        if o.name not in tc.TOPIC_CONFIGS:
            raise ConfigRefused(E.INVALID_CONFIG, f"Unknown topic config name: {o.name}")
    try:
        new = config_ops.apply_ops(current, [(o.name, o.op, o.value if o.has_value else None) for o in change.ops],
                                   change.replace, _list_default)
    except config_ops.ConfigOpRefused as e:
        raise ConfigRefused(e.code, str(e)) from None
    if (why := tc.validate(new)) is not None:
        raise ConfigRefused(E.INVALID_CONFIG, why)
    return new


def _list_default(name: str) -> str | None:
    key = tc.TOPIC_CONFIGS[name]
    return key.default if key.type == tc.LIST else None


def alter_topic_configs(c, change: controller_pb2.TopicConfigChange,
                        validate_only: bool) -> controller_pb2.AlterTopicConfigResult:
    """The active controller `c` (on its event thread) changes one topic's configs."""
    def result(code=E.NONE, msg=""):
        return controller_pb2.AlterTopicConfigResult(topic=change.topic, error=code, error_message=msg)
    if not c.active:
        return result(E.NOT_CONTROLLER, "this controller is not active")
    if change.topic not in c.ctx.assignments:
        return result(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    current = dict(c.ctx.configs.get(change.topic, {}))
    try:
        new = apply_ops(current, change)
    except ConfigRefused as e:
        return result(e.code, str(e))
    if validate_only or new == current:
        return result()
    path = zk_paths.topic_config_path(change.topic)
    data = zk_paths.encode({"version": 1, "config": new})
    tx = c.zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, c.epoch_zk_version)
    if c.zk.exists(path):
        tx.set_data(path, data)
    else:
        tx.create(path, data, makepath=False)
    results = check_fenced(tx.commit())
    if any(isinstance(r, Exception) for r in results):
        return result(E.UNKNOWN_SERVER_ERROR, f"zookeeper refused the config change: {results!r}")
    with c.lock:
        c.ctx.configs[change.topic] = new
    log.info("topic %s configs are now %s", change.topic, new)
    c.state_changed()
    return result()
