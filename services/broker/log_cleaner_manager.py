"""Which part of a compacted log may be cleaned, and which log to clean first (Kafka's LogCleanerManager).

Guarantees:
- `cleanable_offsets` answers Kafka's [first dirty offset, first uncleanable offset): from the
  cleaner checkpoint (the log start when there is none or it is out of the log's range) up to the
  lowest of the last stable offset, the active segment's base and, with min.compaction.lag.ms, the
  first dirty segment holding a record newer than the lag. Nothing at or above the last stable
  offset is ever cleanable, so an open transaction is never touched.
- `log_to_clean` measures a log as Kafka does: the bytes of the segments already clean, of those
  cleanable (the uncleanable offset rounded down to its segment's base), their ratio, and whether
  max.compaction.lag.ms makes cleaning due whatever the ratio; `grab_filthiest` picks the log with
  the highest ratio above min.cleanable.dirty.ratio, or one that is due.
- The checkpoint (`cleaner-offset-checkpoint` in the partition's directory, one offset: where the
  next round's dirty section starts) is written atomically and read as -1 when absent or unreadable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from services.broker.checkpoints import read_offset_checkpoint, write_offset_checkpoint

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def read_cleaner_checkpoint(directory: str) -> int:
    path = os.path.join(directory, CLEANER_CHECKPOINT)
    return read_offset_checkpoint(path) if os.path.exists(path) else -1


def write_cleaner_checkpoint(directory: str, offset: int) -> None:
    write_offset_checkpoint(os.path.join(directory, CLEANER_CHECKPOINT), offset)


def segments_between(segments: list, start: int, end: int) -> list:
    """The segments holding offsets in [start, end) (Kafka's logSegments(from, to))."""
    out = []
    for i, seg in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if seg.base_offset < end and (following is None or following > start):
            out.append(seg)
    return out


def segment_base_holding(segments: list, offset: int) -> int:
    """The base of the segment holding `offset` (the last one whose base is <= it)."""
    base = segments[0].base_offset
    for seg in segments:
        if seg.base_offset > offset:
            break
        base = seg.base_offset
    return base


def cleanable_offsets(segments: list, log_start: int, log_end: int, checkpoint: int, last_stable: int, now_ms: int,
                      min_compaction_lag_ms: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) of a log (Kafka's cleanableOffsets)."""
    first_dirty = checkpoint if log_start <= checkpoint <= log_end else log_start
    candidates = [last_stable, segments[-1].base_offset]
    if min_compaction_lag_ms > 0:
        dirty_non_active = [s for s in segments_between(segments[:-1], first_dirty, log_end)]
        for seg in dirty_non_active:
            newest = seg.largest_timestamp if seg.largest_timestamp > 0 else seg.created_ms
            if newest > now_ms - min_compaction_lag_ms:
                candidates.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates))


@dataclass
class LogToClean:
    partition: object
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def log_to_clean(partition, now_ms: int) -> LogToClean:
    """Measure a compacted partition's log (read under the partition's lock)."""
    cfg = partition.config
    with partition.lock:
        log = partition.log
        segments = list(log.segments)
        lso = partition.last_stable_offset
        start, end = log.log_start_offset, log.log_end_offset
    first_dirty, first_uncleanable = cleanable_offsets(segments, start, end, read_cleaner_checkpoint(log.dir), lso,
                                                       now_ms, cfg.min_compaction_lag_ms)
    upper = segment_base_holding(segments, first_uncleanable)
    clean = sum(s.size for s in segments_between(segments, -1, first_dirty))
    cleanable = sum(s.size for s in segments_between(segments, first_dirty, upper)) if upper > first_dirty else 0
    due = False
    if cfg.max_compaction_lag_ms < 2 ** 63 - 1:
        firsts = [s.first_timestamp for s in segments_between(segments[:-1], first_dirty, end)
                  if s.first_timestamp is not None and s.first_timestamp > 0]
        due = bool(firsts) and min(firsts) < now_ms - cfg.max_compaction_lag_ms
    return LogToClean(partition, first_dirty, upper, clean, cleanable, due)


def grab_filthiest(partitions: list, now_ms: int, skip=frozenset()) -> LogToClean | None:
    """The compacted partition to clean next (Kafka's grabFilthiestCompactedLog): of those with something
    cleanable, one that max.compaction.lag.ms makes due or whose ratio is above min.cleanable.dirty.ratio,
    the highest ratio first."""
    best = None
    for p in partitions:
        if not p.config.compacted or (p.topic, p.partition) in skip:
            continue
        ltc = log_to_clean(p, now_ms)
        if ltc.total_bytes == 0 or ltc.cleanable_bytes == 0:
            continue
        if not (ltc.needs_compaction_now or ltc.ratio > p.config.min_cleanable_dirty_ratio):
            continue
        if best is None or ltc.ratio > best.ratio:
            best = ltc
    return best
