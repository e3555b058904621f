"""Scenarios: deterministic experiments from the seed articles, each with an expected verdict.

`eoslab scenario list | run NAME | run --all` (cluster.scenarios.cli). Each
scenario starts its own local cluster, plays a fixed schedule of client
actions and faults (no random timing: faults are injected at exact points and
the scenario waits on conditions), records a history in the checker's
contract, and asks the checker for the verdict. A scenario matches when the
checker's anomaly types equal the expected set and every extra fact (read
from the recorded ops) holds. Families: idempotence (lost ACKs and the
in-flight window), restarts (producer restart with and without a
transactional.id), replication (acks, min.insync.replicas, unclean election,
leader re-election), transactions (id expiry, KAFKA-17754 with and without
KIP-890), hanging transactions (KAFKA-12671's late produce, found and aborted
with KIP-664's tools), a coordinator lost in the middle of a commit, durability
(power loss, torn and corrupt files) and clocks that jump.

Guarantees: `scenarios()` returns every registered scenario in a stable
order; `get(name)` raises KeyError naming the known scenarios.
"""
from __future__ import annotations

import importlib

from cluster.scenarios.base import REGISTRY, ClusterSpec, Fact, Scenario

FAMILIES = ("cluster.scenarios.idempotence", "cluster.scenarios.restarts", "cluster.scenarios.replication",
            "cluster.scenarios.transactions", "cluster.scenarios.hanging", "cluster.scenarios.coordinator_crash",
            "cluster.scenarios.durability", "cluster.scenarios.clock", "cluster.scenarios.hanging_unclean")

__all__ = ["ClusterSpec", "Fact", "Scenario", "get", "scenarios"]


def scenarios() -> list[Scenario]:
    for m in FAMILIES:
        importlib.import_module(m)
    return list(REGISTRY.values())


def get(name: str) -> Scenario:
    known = {s.name: s for s in scenarios()}
    if name not in known:
        raise KeyError(f"unknown scenario {name!r} (known: {', '.join(known)})")
    return known[name]
