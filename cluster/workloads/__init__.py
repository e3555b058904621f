"""Workloads: clients that drive the cluster and record what they saw (Jepsen's client role).

Guarantees: `WORKLOADS` names every built workload; `workload_class(name)`
imports only the one asked for and raises ValueError (one readable line)
for an unknown name. Every workload has the interface of QueueWorkload:
built with (bootstrap, history, seed, topic=..., partitions=..., concurrency=...,
producer_props=..., topic_configs=..., consumer_props=..., options=...,
runtime=...), then `setup()`, `start()`, `halt()`, `final_reads() -> int`,
plus `transactional_ids()` (what kill-coordinator aims at), `notes()`
(extra facts for run.json) and the class attributes `transactional`
(needs transaction coordinators), `strict_unseen` (the checker runs with
--strict-unseen), `controller_args` and `OPTIONS` (its `workload.*` settings).
"""
from __future__ import annotations

import importlib

WORKLOADS = {
    "queue": ("cluster.workloads.queue", "QueueWorkload"),
    "txn": ("cluster.workloads.txn", "TxnWorkload"),
    "copier": ("cluster.workloads.copier", "CopierWorkload"),
    "zombie": ("cluster.workloads.zombie", "ZombieWorkload"),
    "pid": ("cluster.workloads.pid", "PidWorkload"),
}


def workload_class(name: str):
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r} (built: {', '.join(WORKLOADS)})")
    module, cls = WORKLOADS[name]
    return getattr(importlib.import_module(module), cls)
