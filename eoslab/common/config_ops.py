"""Kafka's config vocabulary, held once for every config a broker or controller serves: ConfigResource's
types, DescribeConfigsResponse's ConfigSource, AlterConfigOp's operations, and the rule that applies a
request's operations to an entity's configs.

Guarantees of `apply_ops` (Kafka's ConfigAdminManager.prepareIncrementalConfigs, ZooKeeper mode):
- the operations are applied in order to a copy of the current configs (`replace`: to an empty set,
  AlterConfigs' whole-set replacement); the input is never changed;
- SET stores the value, DELETE removes the name; APPEND adds the values not already in the list (a
  list the entity does not set starts from its default), SUBTRACT removes them;
- refused with ConfigOpRefused and nothing applied: a value missing on anything but DELETE
  (INVALID_REQUEST "Null value not supported for : <name>"), APPEND or SUBTRACT on a config that is not
  a list (INVALID_CONFIG), an operation id Kafka does not have (INVALID_REQUEST). Which names exist and
  which values are valid is the caller's table's rule, checked on the result.
"""
from __future__ import annotations

from typing import Callable, Iterable

from eoslab.common.errors import E

# ConfigResource.Type
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
# DescribeConfigsResponse.ConfigSource
(UNKNOWN, TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
 DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG) = range(9)
# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_VERBS = {APPEND: "append", SUBTRACT: "subtract"}


class ConfigOpRefused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _items(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def apply_ops(current: dict[str, str], ops: Iterable[tuple[str, int, str | None]], replace: bool,
              list_default: Callable[[str], str | None]) -> dict[str, str]:
    """ops: (name, operation, value). list_default(name): a list config's default as text, None for a
    config that is not a list. The configs after the operations; raises ConfigOpRefused."""
    new = {} if replace else dict(current)
    for name, op, value in ops:
        if op != DELETE and value is None:
            raise ConfigOpRefused(E.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        elif op in _VERBS:
            default = list_default(name)
            if default is None:
                raise ConfigOpRefused(E.INVALID_CONFIG,
                                      f"Config value {_VERBS[op]} is not allowed for config key: {name}")
            have, given = _items(new.get(name, default)), _items(value)
            have = have + [x for x in given if x not in have] if op == APPEND else [x for x in have if x not in given]
            new[name] = ",".join(have)
        else:
            raise ConfigOpRefused(E.INVALID_REQUEST, f"unknown config operation {op} for {name}")
    return new
