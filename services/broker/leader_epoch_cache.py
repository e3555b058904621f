"""LeaderEpochFileCache: (leader epoch, start offset) pairs of a partition's log, on disk.

Guarantees: entries are strictly increasing in epoch and in start offset
(an epoch assigned where another starts replaces it, as Kafka's assign); every change is written to `leader-epoch-checkpoint` before it
takes effect, as Kafka's CheckpointFile writes it (temp file, fsync, rename,
fsync of the directory: checkpoints.write_checkpoint_file); `end_offset_for(epoch)` answers as
Kafka's OffsetsForLeaderEpoch does (KIP-101/279): the largest known epoch not
above the one asked for, and the offset where the next epoch starts (or the
log end for the latest epoch).
"""
from __future__ import annotations

import bisect
import os
import threading

from services.broker.checkpoints import write_checkpoint_file

CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED = (-1, -1)


class LeaderEpochFileCache:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, CHECKPOINT)
        self.lock = threading.Lock()
        self.entries: list[tuple[int, int]] = []
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        # format: version, count, then "epoch start_offset" per line (Kafka's checkpoint layout); a file
        # that is not that (corrupt bytes, not even UTF-8) reads as no entries, never a failed partition
        try:
            lines = raw.decode("utf-8").split("\n")
            count = int(lines[1])
            self.entries = [tuple(map(int, ln.split())) for ln in lines[2:2 + count]]
        except (IndexError, ValueError):
            self.entries = []

    def _flush(self) -> None:
        write_checkpoint_file(self.path, f"0\n{len(self.entries)}\n" +
                              "".join(f"{e} {o}\n" for e, o in self.entries))

    @property
    def latest_epoch(self) -> int:
        with self.lock:
            return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (no-op if already the latest)."""
        with self.lock:
            if self.entries and self.entries[-1][0] >= epoch:
                return
            # Kafka's maybeTruncateNonMonotonicEntries: drop the entries that start at or after it (an
            # epoch led without an append leaves no entry once the next one starts at the same offset)
            while self.entries and self.entries[-1][1] >= start_offset:
                self.entries.pop()
            self.entries.append((epoch, start_offset))
            self._flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        with self.lock:
            if not self.entries or epoch < self.entries[0][0]:
                return UNDEFINED
            epochs = [e for e, _ in self.entries]
            i = bisect.bisect_right(epochs, epoch) - 1
            found = self.entries[i][0]
            end = self.entries[i + 1][1] if i + 1 < len(self.entries) else log_end_offset
            return found, end

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at end_offset: forget epochs that start at or after it."""
        with self.lock:
            before = len(self.entries)
            self.entries = [(e, o) for e, o in self.entries if o < end_offset]
            if len(self.entries) != before:
                self._flush()

    def epoch_for_offset(self, offset: int) -> int:
        with self.lock:
            starts = [o for _, o in self.entries]
            i = bisect.bisect_right(starts, offset) - 1
            return self.entries[i][0] if i >= 0 else -1
