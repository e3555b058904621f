"""TransactionManager: producer id, epoch, sequence numbers per partition, and the producer's state machine.

Guarantees:
- sequence numbers of a partition are handed out densely in drain order and
  never reused within an epoch; a batch keeps its sequence across retries;
  `unacked` knows, per partition, every batch that holds a sequence and is
  not yet completed, in sequence order. A new producer id forgets every
  sequence. An idempotent epoch bump renumbers from 0 only the partitions
  that asked for it (Kafka's partitionsToRewriteSequences); every other
  partition's unacknowledged batches keep their epoch and sequence, so a
  batch that was written but not acknowledged is deduplicated on its retry
  instead of written again, and the partition moves to the new epoch when
  the last of them completes (txn_partition_map: stale partitions).
- the state is one of `State`; it changes only through `transition_to`,
  which refuses a change its target does not list as a valid previous state
  (InvalidStateTransition names both), as Kafka's client TransactionManager
  does. ABORTABLE_ERROR and FATAL_ERROR carry the error that caused them.
  The idempotent producer uses UNINITIALIZED -> INITIALIZING -> READY (and
  FATAL_ERROR); the transactional one all eight states. Sender and
  KafkaProducer call the methods below; nothing else writes the state.
- unresolved sequences (Kafka's rule): a batch that failed after it was sent
  (delivery.timeout.ms expired it) may or may not be in the log. Its
  partition is unresolved: no new batch is drained for it until nothing of
  it is in flight; then, if the last acknowledged sequence reaches the
  sequence after the expired batch (a later batch or a late answer showed it
  was written), it is resolved and nothing changes; otherwise the idempotent
  producer bumps its epoch ("bump-epoch") or fails ("fatal"), and the
  transactional one goes to ABORTABLE_ERROR with an epoch bump required
  (KIP-360) or, where the release cannot bump, FATAL_ERROR.
- KIP-360 (`abortable_epoch_bump`, 2.5+): a failed or expired batch,
  INVALID_PRODUCER_EPOCH on produce, and OUT_OF_ORDER_SEQUENCE_NUMBER /
  UNKNOWN_PRODUCER_ID in a transaction make the transaction abortable and
  require an epoch bump, which the abort performs with InitProducerId(pid,
  epoch), so the producer goes on. Without it (0.11) INVALID_PRODUCER_EPOCH,
  OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID are fatal, and a
  failed batch makes the transaction abortable without a bump (sequences are
  not adjusted: a gap it leaves fails the next batch of that partition).
  PRODUCER_FENCED is fatal on every release.
- `commit_sent` is set with COMMITTING_TRANSACTION and kept until the next
  begin_transaction: EndTxn(commit) may have gone out, even when its error
  (PRODUCER_FENCED after an unanswered attempt) moved the state to
  FATAL_ERROR, as Kafka's does.

Transactional bookkeeping: a batch goes out only for a partition the
coordinator has added to the transaction (`txn_partitions`); partitions
waiting to be added are in `pending_partitions`.
"""
from __future__ import annotations

import logging
import threading

from eoslab.common.errors import E, KafkaError
from clients.producer.record_accumulator import ProducerBatch
from clients.producer.transaction_state import VALID_PREVIOUS, InvalidStateTransition, State
from clients.producer.txn_partition_map import TxnPartitionMap
from eoslab.common import record_batch as rb

__all__ = ["InvalidStateTransition", "State", "TransactionManager", "VALID_PREVIOUS"]
log = logging.getLogger(__name__)
S = State

# names the workloads use (tm.state == txm.COMMITTING ...)
UNINITIALIZED, INITIALIZING, READY, IN_TRANSACTION = S.UNINITIALIZED, S.INITIALIZING, S.READY, S.IN_TRANSACTION
COMMITTING, ABORTING = S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION
ABORTABLE_ERROR, FATAL_ERROR = S.ABORTABLE_ERROR, S.FATAL_ERROR


class TransactionManager(TxnPartitionMap):
    def __init__(self, idempotent: bool, transactional_id: str = "", version=None, on_out_of_order: str | None = None):
        self.idempotent = idempotent
        self.transactional_id = transactional_id
        # the idempotent producer's answer to a sequence it cannot resolve: "bump-epoch" (2.5+) or "fatal"
        self.on_out_of_order = on_out_of_order or getattr(version, "on_out_of_order", "bump-epoch")
        # KIP-360: may this release bump the epoch after an abortable error (InitProducerId(pid, epoch))?
        self.can_bump_epoch = bool(getattr(version, "abortable_epoch_bump", True)) and \
            bool(getattr(version, "init_with_producer_id", True))
        self._lock = threading.RLock()
        # one coordinator request of the transaction at a time, in order, as Kafka's queue of
        # TxnRequestHandlers: EndTxn waits for an AddPartitionsToTxn in flight (a late one would reach
        # the coordinator after the EndTxn, at an epoch the EndTxn already bumped)
        self.coordinator_lock = threading.Lock()
        self._state = S.UNINITIALIZED
        self._last_error: Exception | None = None
        self.txn_partitions: set[tuple[str, int]] = set()
        self.pending_partitions: set[tuple[str, int]] = set()
        self.offsets_added = False
        self.epoch_bump_required = False      # transactional: the abort ends with InitProducerId(pid, epoch)
        self.abort_cause: Exception | None = None   # the error that made the transaction abortable
        # EndTxn(commit) of the current transaction may have gone out (set with COMMITTING_TRANSACTION, kept
        # when an error moves the state on): its outcome is then unknown unless the error says otherwise
        self.commit_sent = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_seq: dict[tuple[str, int], int] = {}
        self.last_acked: dict[tuple[str, int], int] = {}
        self.unresolved: dict[tuple[str, int], int] = {}   # partition -> the sequence after an expired batch
        self.unacked: dict[tuple[str, int], list[ProducerBatch]] = {}
        self.partition_ids: dict[tuple[str, int], tuple[int, int]] = {}   # whose sequences a partition holds
        self.bump_pending = False             # idempotent: bump the epoch once nothing is in flight
        self.partitions_to_rewrite: set[tuple[str, int]] = set()   # ... renumbering these partitions
        self.epoch_bumps = 0

    # -- the state machine ------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self._state

    @property
    def last_error(self) -> Exception | None:
        return self._last_error

    @property
    def fatal_error(self) -> Exception | None:
        return self._last_error if self._state is S.FATAL_ERROR else None

    @property
    def abortable_error(self) -> Exception | None:
        return self._last_error if self._state is S.ABORTABLE_ERROR else None

    @property
    def has_error(self) -> bool:
        return self._state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    def transition_to(self, target: State, error: Exception | None = None) -> None:
        """The one way the state changes: refused (InvalidStateTransition) unless `target` allows the current
        state; the error states need the error that caused them."""
        with self._lock:
            source = self._state
            if source not in VALID_PREVIOUS[target]:
                raise InvalidStateTransition(source, target, self.transactional_id)
            if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
                if error is None:
                    raise ValueError(f"a transition to {target} needs the error that caused it")
                self._last_error = error
            else:
                self._last_error = None
            log.debug("producer state %s -> %s%s", source, target, f" ({error})" if error else "")
            self._state = target

    def transition_to_fatal(self, error: Exception) -> None:
        with self._lock:
            if self._state is not S.FATAL_ERROR:
                log.info("producer state %s -> FATAL_ERROR: %s", self._state, error)
                self.transition_to(S.FATAL_ERROR, error)

    def transition_to_abortable(self, error: Exception, bump: bool = False) -> None:
        """The transaction must be aborted; with `bump` (and a release that can) the abort bumps the epoch.
        Ignored while the transaction is already being aborted, as Kafka does."""
        with self._lock:
            if self._state in (S.ABORTING_TRANSACTION, S.FATAL_ERROR):
                return
            bump = bump and self.can_bump_epoch and self._state is not S.COMMITTING_TRANSACTION
            if self._state is not S.ABORTABLE_ERROR:     # else: the first error is the one the user sees
                log.info("producer state %s -> ABORTABLE_ERROR: %s", self._state, error)
                self.transition_to(S.ABORTABLE_ERROR, error)
            if bump:
                self.epoch_bump_required = True

    def abortable_error_if_possible(self, error: Exception) -> None:
        """Kafka's abortableErrorIfPossible: abortable with an epoch bump where the release can, else fatal.
        While aborting (EndTxn(abort) got it) the abort goes on to the bump."""
        with self._lock:
            if not self.can_bump_epoch:
                self.transition_to_fatal(error)
                return
            if self._state is not S.ABORTING_TRANSACTION:
                self.transition_to_abortable(error)
            self.epoch_bump_required = True

    def maybe_fail_with_error(self) -> None:
        """Raise if the producer is in an error state (the fatal error itself; abortable: TRANSACTION_ABORTABLE)."""
        with self._lock:
            err = self._last_error
            if self._state is S.FATAL_ERROR:
                raise err
            if self._state is S.ABORTABLE_ERROR:
                raise KafkaError(E.TRANSACTION_ABORTABLE, f"the transaction must be aborted: {err}")

    # -- transactional steps (called by KafkaProducer) --------------------------------------------
    @property
    def transactional(self) -> bool:
        return bool(self.transactional_id)

    def begin_init(self) -> None:
        """InitProducerId is about to be sent (again, if an earlier attempt failed)."""
        with self._lock:
            self.maybe_fail_with_error()
            if self._state is not S.INITIALIZING:
                self.transition_to(S.INITIALIZING)

    def complete_init(self, pid: int, epoch: int) -> None:
        with self._lock:
            self.set_producer_id(pid, epoch)
            self.reset_transaction()
            self.epoch_bump_required = False
            self.transition_to(S.READY)

    def begin_transaction(self) -> None:
        with self._lock:
            self.maybe_fail_with_error()
            self.transition_to(S.IN_TRANSACTION)
            self.reset_transaction()
            self.commit_sent = False

    def begin_commit(self) -> None:
        """EndTxn(commit) is about to be sent: every batch of the transaction is resolved and none failed.
        COMMITTING_TRANSACTION therefore means EndTxn(commit) may have gone out (the workloads rely on it)."""
        with self._lock:
            self.maybe_fail_with_error()
            if self._state is not S.COMMITTING_TRANSACTION:    # else: a retry of the same commit
                self.transition_to(S.COMMITTING_TRANSACTION)
            self.commit_sent = True

    def begin_abort(self) -> None:
        with self._lock:
            if self._state is S.FATAL_ERROR:
                raise self._last_error
            if self._state is S.ABORTING_TRANSACTION:
                return                                         # a retry of the same abort
            self.abort_cause = self._last_error
            self.transition_to(S.ABORTING_TRANSACTION)
            self.pending_partitions.clear()

    def complete_transaction(self, pid: int = -1, epoch: int = -1) -> bool:
        """EndTxn succeeded (or was not needed). With (pid, epoch) >= 0 from EndTxn (KIP-890 part 2) the
        producer continues with them. Returns True when the epoch must now be bumped (state INITIALIZING)."""
        with self._lock:
            if epoch >= 0 and (pid, epoch) != (self.producer_id, self.producer_epoch):
                self.set_producer_id(pid, epoch)
            bump = self.epoch_bump_required and self._state is S.ABORTING_TRANSACTION
            self.transition_to(S.INITIALIZING if bump else S.READY)
            self.epoch_bump_required = bump
            self.reset_transaction()
            return bump

    def complete_epoch_bump(self, pid: int, epoch: int) -> None:
        """InitProducerId(pid, epoch) answered: a new epoch (or id); every sequence starts again at 0."""
        with self._lock:
            self.set_producer_id(pid, epoch)
            self.epoch_bump_required = False
            self.epoch_bumps += 1
            self.transition_to(S.READY)

    def ensure_in_transaction(self, what: str = "send") -> None:
        with self._lock:
            if self._state is not S.IN_TRANSACTION:
                self.maybe_fail_with_error()
                raise KafkaError(E.INVALID_TXN_STATE, f"{what} outside a transaction (state {self._state})")

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        with self._lock:
            self.ensure_in_transaction()
            if tp not in self.txn_partitions:
                self.pending_partitions.add(tp)

    def partitions_added(self, tps) -> None:
        with self._lock:
            self.txn_partitions |= set(tps)
            self.pending_partitions -= set(tps)

    def partitions_not_added(self, tps) -> None:
        with self._lock:
            self.pending_partitions -= set(tps)

    def offsets_added_to_transaction(self) -> None:
        self.offsets_added = True

    def sendable_partition(self, tp: tuple[str, int]) -> bool:
        return not self.transactional or tp in self.txn_partitions

    def reset_transaction(self) -> None:
        self.txn_partitions.clear()
        self.pending_partitions.clear()
        self.offsets_added = False

    # -- the idempotent producer's id (called by the Sender) ----------------------------------------
    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def begin_idempotent_init(self) -> None:
        """The idempotent producer asks for a producer id (first time, or after its epoch ran out)."""
        with self._lock:
            if self._state is S.READY:
                self.transition_to(S.UNINITIALIZED)
            if self._state is S.UNINITIALIZED:
                self.transition_to(S.INITIALIZING)

    def complete_idempotent_init(self, pid: int, epoch: int) -> None:
        with self._lock:
            self.set_producer_id(pid, epoch)
            self.bump_pending = False
            self.transition_to(S.READY)

    def set_producer_id(self, pid: int, epoch: int) -> None:
        self.producer_id, self.producer_epoch = pid, epoch
        self._reset_sequences()

    def _reset_sequences(self) -> None:
        self.next_seq.clear()
        self.unacked.clear()
        self.last_acked.clear()
        self.unresolved.clear()
        self.partition_ids.clear()
        self.partitions_to_rewrite.clear()

    def maybe_resolve_sequences(self, in_flight) -> None:
        """Judge every unresolved partition with nothing of it in flight (`in_flight(tp)` says), as the module
        doc says."""
        with self._lock:
            for tp in list(self.unresolved):
                if in_flight(tp) or self.unacked.get(tp):
                    continue
                del self.unresolved[tp]
                if self.is_next_sequence(tp, self.next_seq.get(tp, 0)):
                    log.info("%s-%d: unresolved sequence resolved (the expired batch was written)", *tp)
                    continue
                msg = ("the producer got no acknowledgement for records it sent and can no longer retry them; ")
                if self.transactional:
                    if self.can_bump_epoch:
                        self.transition_to_abortable(
                            KafkaError(E.REQUEST_TIMED_OUT, msg + "it is safe to abort the transaction and go on"),
                            bump=True)
                    else:
                        self.transition_to_fatal(KafkaError(E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                            msg + "it is not safe to go on"))
                elif self.idempotent and self.on_out_of_order == "bump-epoch":
                    self.request_epoch_bump(tp)
                elif self.idempotent:
                    self.transition_to_fatal(KafkaError(E.OUT_OF_ORDER_SEQUENCE_NUMBER, msg + "it is not safe to go "
                                                        "on (on.out.of.order=fatal)"))

    def request_epoch_bump(self, tp=None) -> None:
        """Idempotent producer: bump the epoch once nothing is in flight, renumbering `tp` from 0 (every
        partition when no partition is named)."""
        with self._lock:
            self.bump_pending = True
            self.partitions_to_rewrite.update(self.unacked.keys() | self.partition_ids.keys() if tp is None
                                              else {tp})

    def bump_epoch(self) -> list[ProducerBatch]:
        """The next epoch (Kafka's bumpIdempotentProducerEpoch): the partitions that asked for it start again at
        sequence 0; the others are stale until their unacknowledged batches complete under the old epoch.
        Returns the batches that lost their sequence."""
        with self._lock:
            self.producer_epoch += 1
            renumber = []
            for tp in self.partitions_to_rewrite:
                renumber += self.start_sequences_at_beginning(tp)
            self.partitions_to_rewrite.clear()
            self.epoch_bumps += 1
            self.bump_pending = False
            return renumber

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= rb.MAX_PRODUCER_EPOCH

