"""Flags for the services, checked before anything starts.

Guarantees: `check(role, flags)` checks `flags` in-process against the role's
typed config (BrokerConfig, ControllerConfig, CoordinatorConfig: the same
declarations the service parses at start) and starts nothing; a flag the
service does not know, a value it refuses, or a flag the runtime sets itself
(ids, addresses, data directory) raises ValueError with one line naming the
role and the problem, so `eoslab cluster up --broker-arg ...` and `eoslab run
--set broker.x=...` fail at once rather than when the service exits at start.
`check_topic_configs` applies the topic-config rules (eoslab.common.topics) to topic configs.
"""
from __future__ import annotations

from eoslab.common.config import ConfigError


def config_def(role: str):
    if role == "broker":
        from services.broker.config import BrokerConfig
        return BrokerConfig.DEF
    if role == "controller":
        from services.controller.config import ControllerConfig
        return ControllerConfig.DEF
    if role == "txn-coordinator":
        from services.txn_coordinator.config import CoordinatorConfig
        return CoordinatorConfig.DEF
    raise ValueError(f"unknown role {role!r}")


def check(role: str, flags) -> None:
    flags = list(flags)
    if not flags:
        return
    try:
        config_def(role).check_flags(flags)
    except ConfigError as e:
        raise ValueError(f"{role} flags {' '.join(flags)}: {e}") from None


def check_topic_configs(configs: dict[str, str]) -> None:
    from eoslab.common.topics import validate_configs
    msg = validate_configs(dict(configs))
    if msg is not None:
        raise ValueError(f"topic config: {msg}")
