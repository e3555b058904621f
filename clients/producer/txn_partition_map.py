"""TxnPartitionMap: the producer's sequence numbers per partition (Kafka's client TxnPartitionMap).

Guarantees: sequence numbers of a partition are handed out densely in drain order and never reused
within an epoch; a batch keeps its sequence, producer id and epoch across retries; `unacked` holds,
per partition, every batch that holds a sequence and is not yet completed, in sequence order;
`last_acked` only moves forward (in wrapping sequence order) and only for batches of the producer id
and epoch the partition's sequences belong to (`partition_ids`, Kafka's TxnPartitionEntry
.producerIdAndEpoch); an expired batch's partition is `unresolved` until
TransactionManager.maybe_resolve_sequences judges it.

A partition whose sequences belong to an older epoch than the producer's (an epoch bump that other
partitions asked for) is stale: its batches that hold a sequence finish under their own epoch, and
its first new batch after the last of them starts the new epoch at sequence 0 (Kafka's
maybeUpdateProducerIdAndEpoch); `may_start_new_batch` says no while any of them is unacknowledged.
Mixed into TransactionManager, whose producer id, epoch and `idempotent` it reads.
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
        """Stamp a batch without a sequence with the producer id, epoch and its sequence; a batch that holds
        one (a retry) keeps all three."""
        if not self.idempotent or batch.base_sequence is not None:
            return
        tp = batch.tp
        if self.is_stale(tp):          # nothing of the old epoch is unacknowledged: start this one at 0
            self.start_sequences_at_beginning(tp)
        batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
        self.partition_ids[tp] = (self.producer_id, self.producer_epoch)
        seq = self.next_seq.get(tp, 0)
        batch.base_sequence = seq
        self.next_seq[tp] = _wrap(seq + batch.record_count)
        lst = self.unacked.setdefault(tp, [])
        keys = [b.base_sequence for b in lst]
        lst.insert(bisect.bisect(keys, seq), batch)

    def is_stale(self, tp: tuple[str, int]) -> bool:
        """The partition's sequences belong to another producer id or epoch than the producer's now."""
        ids = self.partition_ids.get(tp)
        return ids is not None and ids != (self.producer_id, self.producer_epoch)

    def may_start_new_batch(self, tp: tuple[str, int]) -> bool:
        """Kafka's RecordAccumulator.shouldStopDrainBatchesForPartition, the sequence half: no new batch while
        an earlier sequence is unresolved, nor while a stale partition still has unacknowledged batches (a
        new epoch's sequence 0 could be written before them)."""
        return tp not in self.unresolved and not (self.is_stale(tp) and self.unacked.get(tp))

    def start_sequences_at_beginning(self, tp: tuple[str, int]) -> list[ProducerBatch]:
        """The partition's sequences start again at 0 under the producer's id and epoch; its unacknowledged
        batches lose their sequence (they are renumbered when drained) and answers to their earlier
        attempts no longer count. Returns those batches."""
        renumber = self.unacked.pop(tp, [])
        for b in renumber:
            b.base_sequence = None
            b.attempt_token += 1
        self.next_seq.pop(tp, None)
        self.last_acked.pop(tp, None)
        self.unresolved.pop(tp, None)
        self.partition_ids[tp] = (self.producer_id, self.producer_epoch)
        return renumber

    def acked(self, batch: ProducerBatch) -> None:
        """The batch is complete (acknowledged or failed): it no longer holds a pending sequence."""
        lst = self.unacked.get(batch.tp)
        if lst and batch in lst:
            lst.remove(batch)

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged the batch (also a late answer for a batch that already expired)."""
        self.acked(batch)
        if batch.base_sequence is None or not self._of_partition_ids(batch):
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
        if batch.base_sequence is None or not self._of_partition_ids(batch):
            return
        nxt = _wrap(batch.base_sequence + batch.record_count)
        cur = self.unresolved.get(batch.tp)
        self.unresolved[batch.tp] = nxt if cur is None or _seq_after(nxt, cur) else cur
        log.info("%s-%d: sequence %d unresolved (an expired batch may have been written)",
                 batch.topic, batch.partition, batch.base_sequence)

    def _of_partition_ids(self, batch: ProducerBatch) -> bool:
        """The batch's sequence belongs to its partition's current sequence numbering."""
        return self.partition_ids.get(batch.tp, (self.producer_id, self.producer_epoch)) == \
            (batch.producer_id, batch.producer_epoch)

    def is_next_sequence(self, tp: tuple[str, int], seq: int) -> bool:
        return seq == _wrap(self.last_acked.get(tp, NO_LAST_ACKED) + 1)


def _wrap(seq: int) -> int:
    """Sequences wrap from MAX_SEQUENCE to 0 (and -1 + 1 is 0)."""
    return seq % (rb.MAX_SEQUENCE + 1)


def _seq_after(a: int, b: int) -> bool:
    """a comes after b in sequence order (within half the sequence space)."""
    d = (a - b) % (rb.MAX_SEQUENCE + 1)
    return 0 < d < (rb.MAX_SEQUENCE + 1) // 2
