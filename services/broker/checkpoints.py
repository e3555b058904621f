"""The high-watermark checkpoint file of one partition (Kafka's replication-offset-checkpoint,
kept here per partition directory).

Guarantees: a write replaces the file whole (written beside it, then renamed), so a reader sees
the old value or the new one, never a torn one; a missing or unreadable file reads as 0, which is
safe: a restarted leader then starts its high watermark low, never past what was replicated. The
checkpoint is only ever behind the live high watermark, never ahead.
"""
from __future__ import annotations

import os

HW_CHECKPOINT = "high-watermark-checkpoint"
HW_CHECKPOINT_INTERVAL_S = 1.0      # the ReplicaManager writes the checkpoints this often


def read_hw_checkpoint(path: str) -> int:
    """The checkpointed high watermark, or 0 when there is none (or it cannot be read)."""
    try:
        with open(path) as f:
            return max(0, int(f.read().strip()))
    except (OSError, ValueError):
        return 0


def write_hw_checkpoint(path: str, hw: int) -> None:
    """Replace the checkpoint with `hw` (an OSError is the caller's to report)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{hw}\n")
    os.replace(tmp, path)
