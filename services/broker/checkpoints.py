"""A partition directory's checkpoint files and its clean-shutdown marker.

- `high-watermark-checkpoint` (Kafka's replication-offset-checkpoint, kept here per partition
  directory): the high watermark. A missing or unreadable file reads as 0, which is safe: a
  restarted leader then starts its high watermark low, never past what was replicated. The
  checkpoint is only ever behind the live high watermark, never ahead.
- `recovery-point-offset-checkpoint` (Kafka's file of that name, per partition directory here):
  the log's recovery point, the offset below which every segment is known to be on disk. A
  missing or unreadable file reads as 0: the whole log is then recovered, which is safe.
- `.kafka_cleanshutdown` (Kafka's CleanShutdownFileHandler, per partition directory here): written
  last on a clean close, after the log was flushed; consumed (read and deleted) when the log is
  opened. Written and deleted exactly as Kafka does: the file is fsynced, its directory is not
  (after a crash the deletion may be undone by the disk, as it may be in Kafka).

Every checkpoint is written as Kafka's CheckpointFile writes one: a temp file beside it, fsync of
the temp file, an atomic rename over the old file, fsync of the directory; so a reader sees the
old value or the new one, never a torn one, and once the call returns the new value is on disk.
"""
from __future__ import annotations

import json
import os

HW_CHECKPOINT = "high-watermark-checkpoint"
HW_CHECKPOINT_INTERVAL_S = 1.0      # the ReplicaManager writes the checkpoints this often
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def fsync_file(path: str) -> None:
    """fsync a file (or a directory) by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    """Make the directory's entries (created, renamed files) durable (Kafka's Utils.flushDir)."""
    fsync_file(directory)


def write_checkpoint_file(path: str, text: str) -> None:
    """Replace `path` with `text`: temp file, fsync, atomic rename, fsync of the directory (Kafka's
    CheckpointFile.write with Utils.atomicMoveWithFallback). An OSError is the caller's to report."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_offset_checkpoint(path: str) -> int:
    """The one offset a checkpoint holds, or 0 when there is none (or it cannot be read)."""
    try:
        with open(path) as f:
            return max(0, int(f.read().strip()))
    except (OSError, ValueError):
        return 0


def write_offset_checkpoint(path: str, offset: int) -> None:
    write_checkpoint_file(path, f"{offset}\n")


def read_hw_checkpoint(path: str) -> int:
    """The checkpointed high watermark, or 0 when there is none (or it cannot be read)."""
    return read_offset_checkpoint(path)


def write_hw_checkpoint(path: str, hw: int) -> None:
    """Replace the checkpoint with `hw` (an OSError is the caller's to report)."""
    write_offset_checkpoint(path, hw)


def write_clean_shutdown_marker(directory: str) -> None:
    """Mark the directory's log as closed cleanly: write and fsync the marker (no directory fsync,
    as Kafka's CleanShutdownFileHandler.write)."""
    with open(os.path.join(directory, CLEAN_SHUTDOWN_FILE), "w") as f:
        f.write(json.dumps({"version": 0}))
        f.flush()
        os.fsync(f.fileno())


def consume_clean_shutdown_marker(directory: str) -> bool:
    """Whether the log in `directory` was closed cleanly; the marker is deleted (no directory
    fsync, as Kafka's LogManager deletes it on startup), so a crash from now on counts as unclean."""
    path = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False


def consume_broker_clean_shutdown(data_dir: str) -> bool:
    """Whether the broker process that used `data_dir` before shut down cleanly (the log dir's own
    `.kafka_cleanshutdown`, which KRaft's broker reads to register with its previous broker epoch,
    KIP-966). A data directory without any partition directory counts as clean (nothing to lose).
    The marker is deleted and, unlike a partition's, the deletion is made durable at once, so that a
    later power loss cannot bring it back and make an unclean shutdown look clean."""
    try:
        if not consume_clean_shutdown_marker(data_dir):
            return not any(e.is_dir() for e in os.scandir(data_dir))
    except FileNotFoundError:               # no data directory yet: a new broker
        return True
    fsync_dir(data_dir)
    return True


def write_broker_clean_shutdown(data_dir: str) -> None:
    """Mark the broker's data directory as shut down cleanly (after every log was closed cleanly)."""
    write_clean_shutdown_marker(data_dir)
    fsync_dir(data_dir)
