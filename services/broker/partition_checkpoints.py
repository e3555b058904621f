"""PartitionCheckpoints: a Partition's writes to disk off the append path: the high-watermark
checkpoint, the log flusher's time-based flush and the recovery-point checkpoint.

Guarantees: each runs under the partition's lock; a failed write is logged, never raised, and leaves
the previous checkpoint in place (a stale checkpoint is only lower, which is safe: a restarted
replica starts lower, never past what was replicated or synced). Mixed into Partition, whose
`lock`, `log`, `high_watermark`, `hw_checkpoint_path` and `_hw_checkpointed` it uses.
"""
from __future__ import annotations

import logging

from services.broker.checkpoints import write_hw_checkpoint

log = logging.getLogger("services.broker.partition")


class PartitionCheckpoints:
    def checkpoint_hw(self) -> None:
        """Write the high watermark to disk when it moved since the last write. Called off the append
        path (the ReplicaManager's maintenance thread, about once a second, as Kafka's
        replica.high.watermark.checkpoint.interval.ms) and on close; a stale checkpoint is only lower,
        which is safe."""
        hw = self.high_watermark
        if hw == self._hw_checkpointed:
            return
        try:
            write_hw_checkpoint(self.hw_checkpoint_path, hw)
            self._hw_checkpointed = hw
        except OSError as e:
            log.warning("%s-%d: high watermark checkpoint failed: %s", self.topic, self.partition, e)

    def flush_if_due(self) -> None:
        """The log flusher (every log.flush.scheduler.interval.ms): flush when flush.ms has passed."""
        self._log_io(self.log.flush_if_due, "log flush")

    def checkpoint_recovery_point(self) -> None:
        """Every log.flush.offset.checkpoint.interval.ms: write the log's recovery point if it moved."""
        self._log_io(self.log.checkpoint_recovery_point, "recovery point checkpoint")

    def _log_io(self, fn, what: str) -> None:
        with self.lock:
            try:
                fn()
            except OSError as e:
                log.warning("%s-%d: %s failed: %s", self.topic, self.partition, what, e)
