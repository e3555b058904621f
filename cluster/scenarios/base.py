"""What a scenario is: a named, deterministic experiment with an expected verdict.

Guarantees: a `Scenario` names the seed article it reproduces, the cluster it
needs (`ClusterSpec`), the anomalies the checker is expected to report (an
exact set: empty means the history must be valid) and any extra facts that the
checker cannot express (each a function of the recorded ops that returns None
when the fact holds, else why it does not). `drive(ctx)` plays the scenario
against a running cluster through a `cluster.scenarios.context.Context`; it
never decides the verdict itself: the verdict is the checker's, on the
history the scenario recorded. `register` refuses a duplicate name. A
scenario runs on any Kafka version (`eoslab scenario run --kafka-version V`):
the cluster and the lab's producer behave as V, and `expected_for(V)` is the
verdict Kafka V gives (the scenario says where versions differ).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from eoslab import kafka_version

# (ops of the recorded history, in order) -> None when the fact holds, else the reason it does not
FactCheck = Callable[[list[dict]], "str | None"]


@dataclass(frozen=True)
class ClusterSpec:
    brokers: int = 1
    controllers: int = 1
    txn_coordinators: int = 0
    broker_args: tuple[str, ...] = ()
    txn_coordinator_args: tuple[str, ...] = ()
    session_timeout_ms: int = 2000
    disk: str | None = None            # "lazy": brokers' and ZooKeeper's data dirs on the lazy filesystem
    faketime: bool = False             # libfaketime preloaded into the services (clock faults)

    def describe(self) -> str:
        parts = [f"{self.brokers} broker{'s' if self.brokers != 1 else ''}",
                 f"{self.controllers} controller{'s' if self.controllers != 1 else ''}"]
        if self.txn_coordinators:
            parts.append(f"{self.txn_coordinators} txn coordinator{'s' if self.txn_coordinators != 1 else ''}")
        if self.disk:
            parts.append(f"{self.disk} disks")
        if self.faketime:
            parts.append("faketime")
        flags = list(self.broker_args) + list(self.txn_coordinator_args)
        return ", ".join(parts) + (f" ({' '.join(flags)})" if flags else "")


@dataclass(frozen=True)
class Fact:
    """An expected fact the checker's anomalies cannot express, checked from the recorded ops."""
    name: str
    check: FactCheck


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: str                          # the seed article (and section) it reproduces
    description: str                   # one line
    cluster: ClusterSpec
    expected: frozenset[str]           # anomaly types the checker must report, exactly
    drive: Callable                    # drive(ctx) -> None
    facts: tuple[Fact, ...] = ()
    slow: bool = False
    notes: str = ""                    # longer explanation (docs, list --verbose)
    # Kafka version -> anomalies expected there, where they differ from `expected`
    expected_by_version: tuple[tuple[str, frozenset[str]], ...] = ()
    hang_threshold_s: float | None = None   # the checker's hanging-transaction threshold (None: its default)

    def expected_for(self, version: str | None = None) -> frozenset[str]:
        return dict(self.expected_by_version).get(version or kafka_version.DEFAULT, self.expected)

    def expectation(self, version: str | None = None) -> str:
        return describe_verdict(self.expected_for(version), [f.name for f in self.facts])


def describe_verdict(anomalies: Iterable[str], facts: Iterable[str] = ()) -> str:
    a = sorted(anomalies)
    text = "valid" if not a else "{" + ", ".join(a) + "}"
    f = list(facts)
    return text + ("; " + "; ".join(f) if f else "")


REGISTRY: dict[str, Scenario] = {}


def register(name: str, *, seed: str, description: str, cluster: ClusterSpec, expected: Iterable[str] = (),
             facts: Iterable[Fact] = (), slow: bool = False, notes: str = "",
             expected_by_version: dict[str, Iterable[str]] | None = None, hang_threshold_s: float | None = None):
    """Decorator: register drive(ctx) as scenario `name`; `expected_by_version` names the Kafka
    versions on which the checker must report other anomalies than `expected`."""
    byv = tuple(sorted((kafka_version.get(v).name, frozenset(a)) for v, a in (expected_by_version or {}).items()))
    def wrap(drive: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"scenario {name!r} registered twice")
        REGISTRY[name] = Scenario(name=name, seed=seed, description=description, cluster=cluster,
                                  expected=frozenset(expected), drive=drive, facts=tuple(facts), slow=slow,
                                  notes=notes, expected_by_version=byv, hang_threshold_s=hang_threshold_s)
        return drive
    return wrap


# -- helpers for facts --------------------------------------------------------------------------
def completions(ops: list[dict], f: str | None = None, type_: str | None = None) -> list[dict]:
    return [o for o in ops if o.get("type") != "invoke" and o.get("process") != "nemesis"
            and (f is None or o.get("f") == f) and (type_ is None or o.get("type") == type_)]


def nemesis_ops(ops: list[dict], f: str) -> list[dict]:
    """The completing half of each nemesis info pair named f."""
    pairs = [o for o in ops if o.get("process") == "nemesis" and o.get("f") == f]
    return pairs[1::2]


def session_of(op: dict) -> str | None:
    pr = op.get("producer")
    return pr.get("session") if isinstance(pr, dict) else None
