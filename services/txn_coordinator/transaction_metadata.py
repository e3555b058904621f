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
  so a retried request can be recognised, KIP-360);
- `last_producer_epoch` is recorded only where Kafka records it: a KIP-360
  bump (the init carried the current epoch) and the KIP-890 bump at EndTxn;
  a plain InitProducerId and an epoch fence set it to -1, so a producer
  holding an older epoch can never pass for a retry (zombie fencing);
- with the KIP-890 bump on an exhausted epoch, the next producer id is
  chosen when EndTxn is prepared (`next_producer_id`), returned to the
  client at once, and takes over when the transaction completes;
- the metadata reads no clock: as Kafka's TransactionMetadata, every
  transition that stamps a time takes it (`now_ms`, the coordinator's WALL
  clock, `Time.milliseconds()`) from the caller; txn_start_ms is set when a
  transaction begins (Empty/Complete* -> Ongoing) and kept until it ends,
  txn_last_update_ms is the time of the last transition that stamps one (an
  epoch fence and Dead keep the previous stamps, as in Kafka).
"""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

from eoslab.common.record_batch import MAX_PRODUCER_EPOCH


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
    # transaction.version 2 also aborts from Empty and Complete*: a transaction with no partitions, to
    # bump the epoch (Kafka's TransactionState.PrepareAbort)
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    pass


class ProducerFenced(Exception):
    """The (producer id, epoch) an InitProducerId carried is neither the current nor a retried one."""


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
    next_producer_id: int = -1

    def to_json(self, coordinator_epoch: int) -> dict:
        return {"pid": self.producer_id, "last_pid": self.last_producer_id, "epoch": self.producer_epoch,
                "last_epoch": self.last_producer_epoch, "timeout_ms": self.txn_timeout_ms,
                "state": self.state.value, "partitions": sorted([t, p] for t, p in self.partitions),
                "start_ms": self.txn_start_ms, "update_ms": self.txn_last_update_ms,
                "coordinator_epoch": coordinator_epoch, "next_pid": self.next_producer_id}

    @classmethod
    def from_json(cls, d: dict) -> "TxnTransitMetadata":
        return cls(d["pid"], d["last_pid"], d["epoch"], d["last_epoch"], d["timeout_ms"], S(d["state"]),
                   frozenset((t, p) for t, p in d["partitions"]), d["start_ms"], d["update_ms"],
                   d.get("next_pid", -1))


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
    next_producer_id: int = -1
    pending_state: TransactionState | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    # notified under `lock` whenever a transition completes or is given up
    changed: threading.Condition = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    @classmethod
    def from_transit(cls, tid: str, t: TxnTransitMetadata) -> "TransactionMetadata":
        return cls(tid, t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch,
                   t.txn_timeout_ms, t.state, set(t.partitions), t.txn_start_ms, t.txn_last_update_ms,
                   t.next_producer_id)

    def _transit(self, state: TransactionState, update_ms: int | None, **kw) -> TxnTransitMetadata:
        """The target of a transition to `state`, stamped `update_ms` (None: the previous stamp kept)."""
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending_state.value} is pending")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.value} -> {state.value} is not allowed")
        base = dict(producer_id=self.producer_id, last_producer_id=self.last_producer_id,
                    producer_epoch=self.producer_epoch, last_producer_epoch=self.last_producer_epoch,
                    txn_timeout_ms=self.txn_timeout_ms, state=state, partitions=frozenset(self.partitions),
                    txn_start_ms=self.txn_start_ms,
                    txn_last_update_ms=self.txn_last_update_ms if update_ms is None else update_ms,
                    next_producer_id=self.next_producer_id)
        base.update(kw)
        self.pending_state = state
        return TxnTransitMetadata(**base)

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    def prepare_increment_producer_epoch(self, timeout_ms: int, new_producer_id: int | None,
                                         expected_epoch: int | None = None, *, now_ms: int) -> TxnTransitMetadata:
        """InitProducerId: Empty with epoch + 1, or a new producer id at epoch 0 when exhausted.

        `expected_epoch` is the epoch a KIP-360 init carried (None: a plain init). As Kafka's
        TransactionMetadata.prepareIncrementProducerEpoch: a plain init records no last epoch;
        the current epoch (or none yet) is bumped and remembered as the last one; the last
        epoch is a retry of that bump and gets the current epoch again; anything else is
        ProducerFenced.
        """
        if new_producer_id is not None:
            return self._transit(S.EMPTY, now_ms, producer_id=new_producer_id,
                                 last_producer_id=self.producer_id, producer_epoch=0,
                                 last_producer_epoch=self.producer_epoch if expected_epoch is not None else -1,
                                 txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1,
                                 next_producer_id=-1)
        if expected_epoch is None:
            epoch, last = self.producer_epoch + 1, -1
        elif self.producer_epoch == -1 or expected_epoch == self.producer_epoch:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch      # a retry of a bump that succeeded
        else:
            raise ProducerFenced(f"{self.transactional_id}: epoch {expected_epoch} is neither the current "
                                 f"{self.producer_epoch} nor the last {self.last_producer_epoch}")
        return self._transit(S.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1, next_producer_id=-1)

    def prepare_add_partitions(self, partitions: set[tuple[str, int]], *, now_ms: int) -> TxnTransitMetadata:
        """A transaction begins (its start stamped `now_ms`) or an Ongoing one gains partitions."""
        start = self.txn_start_ms if self.state == S.ONGOING else now_ms
        base = self.partitions if self.state == S.ONGOING else set()
        return self._transit(S.ONGOING, now_ms, partitions=frozenset(base | partitions), txn_start_ms=start)

    def prepare_fence_producer_epoch(self) -> None:
        """Timeout or a new InitProducerId during a transaction: mark it, the abort bumps the epoch."""
        self._transit(S.PREPARE_EPOCH_FENCE, None)

    def prepare_abort_or_commit(self, state: TransactionState, bump_epoch: bool, fence: bool = False,
                                next_producer_id: int | None = None, *, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit / PrepareAbort.

        fence: the abort of an epoch fence (timeout, or an init during the transaction): the epoch
        goes up by one and no last epoch is kept, as Kafka's endTransaction does for a fence.
        bump_epoch: KIP-890 part 2, the epoch goes up by one more and the old one is the last;
        with `next_producer_id` (an exhausted epoch) that id takes over at Complete*. An abort from
        Empty or Complete* (transaction.version 2) has no partitions and starts now.
        """
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if fence:
            if self.pending_state == S.PREPARE_EPOCH_FENCE and state == S.PREPARE_ABORT:
                self.pending_state = None
                self.state = S.PREPARE_EPOCH_FENCE
            epoch, last = epoch + 1, -1
        if bump_epoch and epoch < MAX_PRODUCER_EPOCH:
            epoch, last = epoch + 1, epoch
        kw = dict(producer_epoch=epoch, last_producer_epoch=last)
        if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            kw.update(partitions=frozenset(), txn_start_ms=now_ms)
        if next_producer_id is not None:
            kw["next_producer_id"] = next_producer_id
        return self._transit(state, now_ms, **kw)

    def prepare_complete(self, *, now_ms: int) -> TxnTransitMetadata:
        target = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        kw = {}
        if self.next_producer_id >= 0:
            kw = dict(producer_id=self.next_producer_id, last_producer_id=self.producer_id, producer_epoch=0,
                      last_producer_epoch=self.producer_epoch, next_producer_id=-1)
        return self._transit(target, now_ms, partitions=frozenset(), **kw)

    def next_pid_and_epoch(self) -> tuple[int, int]:
        """What the producer uses after this transaction: the next producer id at epoch 0 once one
        is chosen, else the current pair."""
        if self.next_producer_id >= 0:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(S.DEAD, None, partitions=frozenset())

    def complete_transition(self, t: TxnTransitMetadata) -> None:
        if self.pending_state != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.value}, "
                                    f"pending {self.pending_state}")
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.txn_timeout_ms, self.state, self.partitions = t.txn_timeout_ms, t.state, set(t.partitions)
        self.txn_start_ms, self.txn_last_update_ms = t.txn_start_ms, t.txn_last_update_ms
        self.next_producer_id = t.next_producer_id
        self.pending_state = None
        with self.changed:          # (the lock is re-entrant: callers usually hold it already)
            self.changed.notify_all()

    def abort_transition(self) -> None:
        if self.state == S.PREPARE_EPOCH_FENCE:
            self.state = S.ONGOING
        self.pending_state = None
        with self.changed:          # (the lock is re-entrant: callers usually hold it already)
            self.changed.notify_all()
