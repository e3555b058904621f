"""TransactionManager: producer id, epoch, sequence numbers per partition, and the transaction's state.

Guarantees: sequence numbers of a partition are handed out densely in drain
order and never reused within an epoch; a batch keeps its sequence across
retries; `unacked` knows, per partition, every batch that holds a sequence
and is not yet acknowledged, in sequence order; an epoch bump forgets every
sequence so the unacknowledged batches are renumbered from 0 in the new epoch.

Transactional part (KIP-98): states UNINITIALIZED -> READY -> IN_TRANSACTION
-> COMMITTING_TRANSACTION / ABORTING_TRANSACTION -> READY, plus
ABORTABLE_ERROR (a send failed: only abort is allowed) and FATAL_ERROR
(fenced: nothing is allowed); a batch goes out only for a partition the
coordinator has added to the transaction (`txn_partitions`); partitions
waiting to be added are in `pending_partitions`.
"""
from __future__ import annotations

import bisect

from clients.producer.record_accumulator import ProducerBatch
from services.broker import record_batch as rb


UNINITIALIZED, READY, IN_TRANSACTION = "UNINITIALIZED", "READY", "IN_TRANSACTION"
COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR = ("COMMITTING_TRANSACTION", "ABORTING_TRANSACTION",
                                                      "ABORTABLE_ERROR", "FATAL_ERROR")


class TransactionManager:
    def __init__(self, idempotent: bool, transactional_id: str = ""):
        self.idempotent = idempotent
        self.transactional_id = transactional_id
        self.state = UNINITIALIZED
        self.txn_partitions: set[tuple[str, int]] = set()
        self.pending_partitions: set[tuple[str, int]] = set()
        self.offsets_added = False
        self.abortable_error: Exception | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_seq: dict[tuple[str, int], int] = {}
        self.unacked: dict[tuple[str, int], list[ProducerBatch]] = {}
        self.bump_pending = False
        self.fatal_error: Exception | None = None
        self.epoch_bumps = 0

    @property
    def transactional(self) -> bool:
        return bool(self.transactional_id)

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        if tp not in self.txn_partitions:
            self.pending_partitions.add(tp)

    def sendable_partition(self, tp: tuple[str, int]) -> bool:
        return not self.transactional or tp in self.txn_partitions

    def reset_transaction(self) -> None:
        self.txn_partitions.clear()
        self.pending_partitions.clear()
        self.offsets_added = False
        self.abortable_error = None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, pid: int, epoch: int) -> None:
        self.producer_id, self.producer_epoch = pid, epoch
        self.next_seq.clear()
        self.unacked.clear()

    def assign(self, batch: ProducerBatch) -> None:
        """Stamp the batch with the producer id, epoch and (first time only) its sequence."""
        if not self.idempotent:
            return
        batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
        if batch.base_sequence is None:
            tp = batch.tp
            seq = self.next_seq.get(tp, 0)
            batch.base_sequence = seq
            nxt = seq + batch.record_count
            self.next_seq[tp] = nxt - rb.MAX_SEQUENCE - 1 if nxt > rb.MAX_SEQUENCE else nxt
            lst = self.unacked.setdefault(tp, [])
            keys = [b.base_sequence for b in lst]
            lst.insert(bisect.bisect(keys, seq), batch)

    def acked(self, batch: ProducerBatch) -> None:
        lst = self.unacked.get(batch.tp)
        if lst and batch in lst:
            lst.remove(batch)

    def unacked_before(self, batch: ProducerBatch) -> list[ProducerBatch]:
        return [b for b in self.unacked.get(batch.tp, ()) if b is not batch
                and b.base_sequence is not None and batch.base_sequence is not None
                and b.base_sequence < batch.base_sequence]

    def bump_epoch(self) -> list[ProducerBatch]:
        """New epoch, all sequences forgotten; returns the batches that lost their sequence."""
        renumber = [b for lst in self.unacked.values() for b in lst]
        for b in renumber:
            b.base_sequence = None
            b.attempt_token += 1
        self.next_seq.clear()
        self.unacked.clear()
        self.producer_epoch += 1
        self.epoch_bumps += 1
        self.bump_pending = False
        return renumber

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= rb.MAX_PRODUCER_EPOCH
