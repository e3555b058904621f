"""KIP-664's transaction gauges of a broker (PartitionsWithLateTransactionsCount,
MaxActiveTransactionDuration and the partition of that transaction), as Kafka's ReplicaManager and
ProducerStateManager compute them.

Guarantees: only the partitions given (the broker's leaders) count; a partition is late when the
producer of its oldest open transaction (lowest first offset) last wrote more than
transaction.max.timeout.ms plus Kafka's 5-minute buffer ago; an open transaction's duration counts
from its first batch's timestamp. Each partition is read under its own lock.
"""
from __future__ import annotations

TRANSACTION_MAX_TIMEOUT_MS = 900000  # Kafka's transaction.max.timeout.ms default, the late-transaction bound
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000   # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS


def late_transactions(leaders, now: int, max_timeout_ms: int = TRANSACTION_MAX_TIMEOUT_MS) -> tuple[int, int, str]:
    """(PartitionsWithLateTransactionsCount, MaxActiveTransactionDuration ms, the partition of that
    transaction or "") over `leaders` at wall-clock time `now` (ms); late as Kafka's
    ProducerStateManager.hasLateTransaction."""
    late, longest, where = 0, 0, ""
    for p in leaders:
        with p.lock:
            open_txns = sorted((e.current_txn_first_offset, e) for e in p.producer_state.producers.values()
                               if e.current_txn_first_offset is not None)
            if not open_txns:
                continue
            first, oldest = open_txns[0]
            if oldest.last_timestamp > 0 and now - oldest.last_timestamp > max_timeout_ms + \
                    LATE_TRANSACTION_BUFFER_MS:
                late += 1
            batches = p.log.read(first, max_bytes=1)
        if batches and batches[0].max_timestamp > 0 and (not where or now - batches[0].max_timestamp > longest):
            longest, where = max(0, now - batches[0].max_timestamp), f"{p.topic}-{p.partition}"
    return late, longest, where
