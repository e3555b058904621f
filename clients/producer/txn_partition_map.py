"""TxnPartitionMap: the producer's sequence numbers per partition (Kafka's client TxnPartitionMap).

Guarantees: sequence numbers of a partition are handed out densely in drain order and never reused
within an epoch; a batch keeps its sequence across retries; `unacked` holds, per partition, every
batch that holds a sequence and is not yet completed, in sequence order; `last_acked` only moves
forward (in wrapping sequence order) and only for batches of the current producer id and epoch;
an expired batch's partition is `unresolved` until TransactionManager.maybe_resolve_sequences
judges it. Mixed into TransactionManager, whose producer id, epoch and `idempotent` it reads.
"""
from __future__ import annotations

import bisect
import logging

from clients.producer.record_accumulator import ProducerBatch
from eoslab.common import record_batch as rb

log = logging.getLogger("clients.producer.transaction_manager")
NO_LAST_ACKED = -1


class TxnPartitionMap:
    def assign(self, batch: ProducerBatch) -> None:
        """Stamp the batch with the producer id, epoch and (first time only) its sequence."""
        if not self.idempotent:
            return
        batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
        if batch.base_sequence is None:
            tp = batch.tp
            seq = self.next_seq.get(tp, 0)
            batch.base_sequence = seq
            self.next_seq[tp] = _wrap(seq + batch.record_count)
            lst = self.unacked.setdefault(tp, [])
            keys = [b.base_sequence for b in lst]
            lst.insert(bisect.bisect(keys, seq), batch)

    def acked(self, batch: ProducerBatch) -> None:
        """The batch is complete (acknowledged or failed): it no longer holds a pending sequence."""
        lst = self.unacked.get(batch.tp)
        if lst and batch in lst:
            lst.remove(batch)

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged the batch (also a late answer for a batch that already expired)."""
        self.acked(batch)
        if batch.base_sequence is None or batch.producer_epoch != self.producer_epoch \
                or batch.producer_id != self.producer_id:
            return
        last = _wrap(batch.base_sequence + batch.record_count - 1)
        prev = self.last_acked.get(batch.tp, NO_LAST_ACKED)
        if prev == NO_LAST_ACKED or _seq_after(last, prev):
            self.last_acked[batch.tp] = last

    def unacked_before(self, batch: ProducerBatch) -> list[ProducerBatch]:
        return [b for b in self.unacked.get(batch.tp, ()) if b is not batch
                and b.base_sequence is not None and batch.base_sequence is not None
                and b.base_sequence < batch.base_sequence]

    def has_unresolved_sequence(self, tp: tuple[str, int]) -> bool:
        return tp in self.unresolved

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """The batch expired after it was sent: whether the log holds it is unknown for now."""
        if batch.base_sequence is None or batch.producer_epoch != self.producer_epoch:
            return
        nxt = _wrap(batch.base_sequence + batch.record_count)
        cur = self.unresolved.get(batch.tp)
        self.unresolved[batch.tp] = nxt if cur is None or _seq_after(nxt, cur) else cur
        log.info("%s-%d: sequence %d unresolved (an expired batch may have been written)",
                 batch.topic, batch.partition, batch.base_sequence)

    def is_next_sequence(self, tp: tuple[str, int], seq: int) -> bool:
        return seq == _wrap(self.last_acked.get(tp, NO_LAST_ACKED) + 1)


def _wrap(seq: int) -> int:
    """Sequences wrap from MAX_SEQUENCE to 0 (and -1 + 1 is 0)."""
    return seq % (rb.MAX_SEQUENCE + 1)


def _seq_after(a: int, b: int) -> bool:
    """a comes after b in sequence order (within half the sequence space)."""
    d = (a - b) % (rb.MAX_SEQUENCE + 1)
    return 0 < d < (rb.MAX_SEQUENCE + 1) // 2
