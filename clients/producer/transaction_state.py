"""The producer's states and their valid transitions, as Kafka's client TransactionManager.State.

Guarantees: `VALID_PREVIOUS[target]` lists every state `target` may be
entered from; FATAL_ERROR may be entered from any other state and never
left. TransactionManager.transition_to is the only user; an invalid change
raises InvalidStateTransition naming both states.
"""
from __future__ import annotations

import enum

from eoslab.common.errors import E, KafkaError


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"

    def __str__(self) -> str:
        return self.value


S = State
# target -> the states it may be entered from (Kafka's TransactionManager.State.isTransitionValid);
# FATAL_ERROR may be entered from anywhere and is never left.
VALID_PREVIOUS: dict[State, frozenset[State]] = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR,
                                  S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(State) - {S.FATAL_ERROR},
}


class InvalidStateTransition(KafkaError):
    """A transition its target does not allow from the current state (Kafka: IllegalStateException)."""

    def __init__(self, source: State, target: State, transactional_id: str = ""):
        who = f"transactional.id {transactional_id!r}: " if transactional_id else ""
        super().__init__(E.INVALID_TXN_STATE, f"{who}invalid transition from {source} to {target}")
        self.source, self.target = source, target
