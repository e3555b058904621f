"""TransactionMetadata: one transactional.id's producer id, epoch and transaction state.

Guarantees:
- the state machine is Kafka's: a transition is allowed only from the target
  state's valid previous states (below), else IllegalTransition;
- every change is two-phase: `prepare_*` computes the target
  (TxnTransitMetadata) and marks the metadata with a pending state, the
  coordinator writes the target to __transaction_state, and only then
  `complete_transition` applies it (or `abort_transition` forgets it after a
  failed write); while a state is pending every other request for the id is
  answered CONCURRENT_TRANSACTIONS;
- the producer epoch never goes down for a producer id; on exhaustion a new
  producer id starts at epoch 0 (the previous one is kept as last_producer_id
  so a retried request can be recognised, KIP-360).
"""
from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field

from services.broker.record_batch import MAX_PRODUCER_EPOCH


class TransactionState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    pass


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TxnTransitMetadata:
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    txn_start_ms: int
    txn_last_update_ms: int

    def to_json(self, coordinator_epoch: int) -> dict:
        return {"pid": self.producer_id, "last_pid": self.last_producer_id, "epoch": self.producer_epoch,
                "last_epoch": self.last_producer_epoch, "timeout_ms": self.txn_timeout_ms,
                "state": self.state.value, "partitions": sorted([t, p] for t, p in self.partitions),
                "start_ms": self.txn_start_ms, "update_ms": self.txn_last_update_ms,
                "coordinator_epoch": coordinator_epoch}

    @classmethod
    def from_json(cls, d: dict) -> "TxnTransitMetadata":
        return cls(d["pid"], d["last_pid"], d["epoch"], d["last_epoch"], d["timeout_ms"], S(d["state"]),
                   frozenset((t, p) for t, p in d["partitions"]), d["start_ms"], d["update_ms"])


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    pending_state: TransactionState | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @classmethod
    def from_transit(cls, tid: str, t: TxnTransitMetadata) -> "TransactionMetadata":
        return cls(tid, t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch,
                   t.txn_timeout_ms, t.state, set(t.partitions), t.txn_start_ms, t.txn_last_update_ms)

    def _transit(self, state: TransactionState, **kw) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending_state.value} is pending")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.value} -> {state.value} is not allowed")
        base = dict(producer_id=self.producer_id, last_producer_id=self.last_producer_id,
                    producer_epoch=self.producer_epoch, last_producer_epoch=self.last_producer_epoch,
                    txn_timeout_ms=self.txn_timeout_ms, state=state, partitions=frozenset(self.partitions),
                    txn_start_ms=self.txn_start_ms, txn_last_update_ms=now_ms())
        base.update(kw)
        self.pending_state = state
        return TxnTransitMetadata(**base)

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    def prepare_increment_producer_epoch(self, timeout_ms: int, new_producer_id: int | None) -> TxnTransitMetadata:
        """InitProducerId: Empty with epoch + 1, or a new producer id at epoch 0 when exhausted."""
        if new_producer_id is not None:
            return self._transit(S.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
                                 producer_epoch=0, last_producer_epoch=self.producer_epoch,
                                 txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1)
        return self._transit(S.EMPTY, producer_epoch=self.producer_epoch + 1,
                             last_producer_epoch=self.producer_epoch, txn_timeout_ms=timeout_ms,
                             partitions=frozenset(), txn_start_ms=-1)

    def prepare_add_partitions(self, partitions: set[tuple[str, int]]) -> TxnTransitMetadata:
        start = self.txn_start_ms if self.state == S.ONGOING else now_ms()
        base = self.partitions if self.state == S.ONGOING else set()
        return self._transit(S.ONGOING, partitions=frozenset(base | partitions), txn_start_ms=start)

    def prepare_fence_producer_epoch(self) -> None:
        """Timeout or a new InitProducerId during a transaction: mark it, the abort bumps the epoch."""
        self._transit(S.PREPARE_EPOCH_FENCE)

    def prepare_abort_or_commit(self, state: TransactionState, bump_epoch: bool,
                                new_producer_id: int | None = None) -> TxnTransitMetadata:
        """PrepareCommit / PrepareAbort; bump_epoch: the fence after a timeout, or KIP-890 part 2."""
        if self.pending_state == S.PREPARE_EPOCH_FENCE and state == S.PREPARE_ABORT:
            self.pending_state = None
            self.state = S.PREPARE_EPOCH_FENCE
        kw = {}
        if bump_epoch:
            kw = dict(producer_epoch=self.producer_epoch + 1, last_producer_epoch=self.producer_epoch)
        return self._transit(state, **kw)

    def prepare_complete(self, next_producer_id: int | None = None) -> TxnTransitMetadata:
        target = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        kw = {}
        if next_producer_id is not None:
            kw = dict(producer_id=next_producer_id, last_producer_id=self.producer_id, producer_epoch=0,
                      last_producer_epoch=self.producer_epoch)
        return self._transit(target, partitions=frozenset(), **kw)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(S.DEAD, partitions=frozenset())

    def complete_transition(self, t: TxnTransitMetadata) -> None:
        if self.pending_state != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.value}, "
                                    f"pending {self.pending_state}")
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.txn_timeout_ms, self.state, self.partitions = t.txn_timeout_ms, t.state, set(t.partitions)
        self.txn_start_ms, self.txn_last_update_ms = t.txn_start_ms, t.txn_last_update_ms
        self.pending_state = None

    def abort_transition(self) -> None:
        if self.state == S.PREPARE_EPOCH_FENCE:
            self.state = S.ONGOING
        self.pending_state = None
