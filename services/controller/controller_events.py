"""The controller's events (Kafka's ControllerEvent case objects): one class per event, processed in order on
the controller's single event thread.

Guarantees: every change to the controller's state starts as one of these,
put on `KafkaController.events` (from ZooKeeper watches, the session listener,
RPC handlers through `Call`, or a failed event retried); `retry_on_failure`
marks the events the active controller puts back after a failure, so a
transient ZooKeeper error does not leave a broker change unhandled.
"""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, Callable


class ControllerEvent:
    retry_on_failure = False

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Elect(ControllerEvent):
    """Run for controller: at start, and when /controller disappears (Kafka: Startup, Reelect)."""
    retry_on_failure = True


@dataclass(frozen=True)
class Reconnected(ControllerEvent):
    """The ZooKeeper session is back: register again and run for controller."""


@dataclass(frozen=True)
class Resign(ControllerEvent):
    """Stop acting as controller (session lost, or a newer controller epoch seen)."""
    reason: str


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The set of registered brokers changed (Kafka: BrokerChange)."""
    retry_on_failure = True


@dataclass(frozen=True)
class CoordinatorChange(ControllerEvent):
    """The set of registered transaction coordinators changed: reassign __transaction_state partitions."""
    retry_on_failure = True


@dataclass(frozen=True)
class ClusterDefaultsChange(ControllerEvent):
    """The brokers' dynamic cluster default changed (Kafka: DynamicLogConfig.reconfigure on the controller's
    broker, which raises UncleanLeaderElectionEnable when unclean.leader.election.enable turns true)."""
    config: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Call(ControllerEvent):
    """Run `fn` on the event thread and hand its result or exception to `future` (an RPC handler's work)."""
    fn: Callable[[], Any]
    future: concurrent.futures.Future


@dataclass(frozen=True)
class ShutdownEventThread(ControllerEvent):
    """The last event the thread processes."""
