"""Nemesis: faults as start/stop pairs on a schedule drawn from a seed, then a final heal.

Guarantees: `schedule(packages, time_limit, seed)` is a pure function of its
arguments (same seed, same schedule); faults run one at a time, each stopped
before the next starts; every start and stop is recorded in the history as a
nemesis info pair naming what was hit; `NemesisRunner.faults` records, for
the lab-error rules (cluster.lab_errors), each fault's package, wall-clock
start (taken before it acts) and end (after its stop returned) and what it
hit, and `errors` every start or stop that raised; `final_heal` removes
network rules, clears injected faults, resumes paused and restarts dead
nodes, and waits until the cluster serves again. The packages themselves
(what each fault does) are in cluster.nemesis_packages, re-exported here.
"""
from __future__ import annotations

import random
import threading
import time

from dataclasses import dataclass

from cluster.nemesis_packages import (PACKAGES, PARTITION_SHAPES, DelayEndTxn, FaultPackage, Kill,  # noqa: F401
                                      KillCoordinator, Loss, LostAck, Partition, PartitionZooKeeper, Pause,
                                      clear_injected_faults, cut_pairs)


@dataclass(frozen=True)
class Event:
    at: float          # seconds from the start of the run
    package: str
    duration: float

    def to_json(self) -> dict:
        return {"at": round(self.at, 3), "package": self.package, "duration": round(self.duration, 3)}


def schedule(packages: list[str], time_limit: float, seed: int, interval=(1.0, 3.0),
             duration=(2.0, 5.0)) -> list[Event]:
    """Staggered start/stop pairs until the time limit; one fault at a time."""
    rng = random.Random(seed)
    out, t = [], rng.uniform(*interval)
    while packages and t < time_limit:
        d = min(rng.uniform(*duration), max(0.5, time_limit - t))
        out.append(Event(t, rng.choice(packages), d))
        t += d + rng.uniform(*interval)
    return out


class Context:
    """What fault packages act on: the runtime, the workload's topic, the history."""

    def __init__(self, runtime, history, topic: str, partitions: int, metadata, rng: random.Random,
                 transactional_ids=None):
        self.runtime = runtime
        self.partitions = partitions
        self.history = history
        self.topic = topic
        self.metadata = metadata
        self.rng = rng
        self.transactional_ids = transactional_ids or (lambda: [])

    def nodes(self, role: str | None = None, state: str | None = "running") -> list[str]:
        return sorted(n.name for n in self.runtime.info().nodes
                      if (role is None or n.role == role) and (state is None or n.state == state))

    def _find_coordinator(self, transactional_id: str):
        """FindCoordinator's answer for the id from the first broker that gives one, or None."""
        from eoslab.v1 import broker_pb2
        for addr in self.metadata.addresses():
            try:
                r = self.metadata.stub(addr).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                    key_type=broker_pb2.TRANSACTION, key=transactional_id), timeout=2)
            except Exception:  # noqa: BLE001 - try the next broker
                continue
            if r.error == 0:
                return r
        return None

    def coordinator_of(self, transactional_id: str) -> str | None:
        """The node name of the transaction coordinator that owns the id now (FindCoordinator)."""
        r = self._find_coordinator(transactional_id)
        if r is not None:
            for n in self.runtime.info().by_role("txn-coordinator"):
                if n.node_id == r.node_id:
                    return n.name
        return None

    def transaction_state(self, transactional_id: str) -> str | None:
        """The id's state on the coordinator that owns it now ("Ongoing", "CompleteCommit", ...), or None
        when no coordinator answers for it or it holds none (DescribeTransactions)."""
        from eoslab.v1 import txn_pb2, txn_pb2_grpc
        r = self._find_coordinator(transactional_id)
        if r is None:
            return None
        try:
            coordinator = self.metadata.channels.stub(f"{r.host}:{r.port}", txn_pb2_grpc.TransactionCoordinatorStub)
            d = coordinator.DescribeTransactions(
                txn_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]), timeout=2)
        except Exception:  # noqa: BLE001 - the coordinator may be mid-fault: no state known
            return None
        return next((t.state for t in d.transactions if t.transactional_id == transactional_id and t.error == 0),
                    None)

    def leader_of(self, partition: int) -> str | None:
        try:
            self.metadata.refresh([self.topic])
        except Exception:  # noqa: BLE001 - the cluster may be mid-fault
            return None
        ld = self.metadata.leader(self.topic, partition)
        return f"broker-{ld[0]}" if ld else None


class NemesisRunner(threading.Thread):
    """Plays a schedule against the cluster, recording each start and stop."""

    def __init__(self, ctx: Context, events: list[Event], t0: float, packages: dict | None = None):
        super().__init__(name="nemesis", daemon=True)
        self.ctx, self.events, self.t0 = ctx, events, t0
        self.packages = PACKAGES if packages is None else packages
        self.stopping = threading.Event()
        self.current: str | None = None
        self.errors: list[str] = []
        self.faults: list[dict] = []       # {"package", "start", "end" (wall clock, s), "target"}

    def run(self) -> None:
        for ev in self.events:
            if self.stopping.wait(max(0.0, self.t0 + ev.at - time.monotonic())):
                return
            pkg = self.packages[ev.package]
            self.current = ev.package
            record = {"package": ev.package, "start": time.time(), "end": None, "target": None}
            self.faults.append(record)
            try:
                started = pkg.start(self.ctx)
            except Exception as e:  # noqa: BLE001 - record it, keep the run going
                started = None
                self.errors.append(f"start-{ev.package}: {e}")
            record["target"] = started
            self.ctx.history.nemesis(f"start-{ev.package}", None, started)
            stopped = self.stopping.wait(ev.duration)
            ended = started
            try:
                ended = pkg.stop(self.ctx, started)       # what the fault did, where a package can tell
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"stop-{ev.package}: {e}")
            record["end"] = time.time()
            self.ctx.history.nemesis(f"stop-{ev.package}", None, ended)
            self.current = None
            if stopped:
                return


def final_heal(ctx: Context, timeout: float = 60.0) -> None:
    """Network rules off, injected faults cleared, every node running, the cluster serving."""
    rt = ctx.runtime
    rt.heal()
    for n in rt.info().nodes:
        if n.state == "paused":
            rt.resume(n.name)
    for n in rt.info().nodes:
        if n.state == "dead":
            rt.start(n.name)
    rt.wait_ready(timeout)
    clear_injected_faults(ctx)
    ctx.history.nemesis("heal", None, "all nodes running, no network rules, no injected faults")
