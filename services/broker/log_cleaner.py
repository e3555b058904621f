"""Log compaction: the Cleaner that rewrites a compacted log's segments, and the LogCleaner thread (Kafka's LogCleaner).

Guarantees:
- A round keeps, for every key in the cleaned range, its record at the latest offset the dirty
  section maps it to, and every record above the map's reach; a record without a key goes; a
  tombstone stays delete.retention.ms after the first round that kept it (the batch's delete
  horizon), then goes. Records keep their offsets, batches keep their producer fields and last
  offset (record_filter), so the log's offsets only gain gaps.
- Transactions are never lost: nothing at or above the last stable offset is cleaned; records of
  an aborted transaction never enter the map (so they never displace a committed record) and are
  removed (Kafka's discarded batches); every control batch is kept as it is, so the
  aborted-transaction index, whose entries end at the ABORT markers, stays true.
- A producer keeps its place: the last batch of an active producer, and the batch ending the
  round, stay as an empty batch when all their records go (Kafka's RETAIN_EMPTY).
- The swap is crash-safe as Kafka's: the cleaned segment is written and synced as `.log.cleaned`,
  renamed `.log.swap`, the segments it replaces renamed `.log.deleted`, then the swap renamed
  `.log`; opening the log finishes or drops an interrupted swap (log_recovery). It happens under
  the partition's lock and only if no truncation, log start move or close came in between;
  replaced segments are closed and their files removed after file.delete.delay.ms, so a read
  already in them finishes.
- An error in one log (an unreadable batch) marks that log uncleanable (logged) and never stops
  the thread; the other logs go on being cleaned.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from eoslab.common import record_batch as rb, record_filter as rf
from eoslab.common.time import SYSTEM, Time
from services.broker.checkpoints import fsync_dir
from services.broker.log_cleaner_manager import (LogToClean, grab_filthiest, segments_between,
                                                 write_cleaner_checkpoint)
from services.broker.log_segment import LogSegment, StoredBatch

log = logging.getLogger(__name__)

SLOT_BYTES = 24                 # Kafka's SkimpyOffsetMap: MD5 of the key and an offset
CLEANED, SWAP, DELETED = ".cleaned", ".swap", ".deleted"
_ALL = 1 << 62


class OffsetMap:
    """Each key's latest offset in the dirty section, up to `slots` keys (Kafka's SkimpyOffsetMap)."""

    def __init__(self, slots: int):
        self.slots = slots
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def full(self) -> bool:
        return len(self.offsets) >= self.slots


@dataclass
class CleanStats:
    end_offset: int = 0                 # where the next round's dirty section starts
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    groups_swapped: int = 0
    aborted: bool = False               # the log changed under the round: nothing swapped from then on


def _aborted_ranges(partition, end: int) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for t in partition.aborted_transactions(0, end):
        out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return out


def _is_aborted(b, aborted: dict) -> bool:
    if not b.is_transactional or b.is_control:
        return False
    return any(first <= b.base_offset <= last for first, last in aborted.get(b.producer_id, ()))


def _batches(seg: LogSegment) -> list[StoredBatch]:
    return seg.read_from(seg.base_offset, _ALL, _ALL)[0]


class Cleaner:
    """One cleaning round on one log (Kafka's Cleaner.doClean)."""

    def __init__(self, time: Time = SYSTEM, dedupe_buffer_size: int = 128 * 1024 * 1024,
                 load_factor: float = 0.9):
        self.time = time
        self.max_keys = max(1, int(dedupe_buffer_size // SLOT_BYTES * load_factor))

    # -- the offset map ----------------------------------------------------------------------------
    def build_offset_map(self, segments: list, start: int, end: int, aborted: dict) -> OffsetMap:
        """Map every key of [start, end) to its latest offset, as far as the map holds (Kafka's
        buildOffsetMap): aborted batches and control batches are never mapped."""
        m = OffsetMap(self.max_keys)
        m.latest_offset = start - 1
        dirty = segments_between(segments, start, end)
        for i, seg in enumerate(dirty):
            for b in _batches(seg):
                if b.base_offset >= end:
                    break
                if not b.is_control and not _is_aborted(b, aborted):
                    for off, key, *_ in rb.records_with_offsets(b):
                        if key is None or off < start:
                            continue
                        if m.full() and key not in m.offsets:
                            return m            # full: the round ends after the last batch mapped whole
                        m.offsets[key] = off
                if b.last_offset >= start:
                    m.latest_offset = max(m.latest_offset, b.last_offset)
            following = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            m.latest_offset = max(m.latest_offset, min(following, end) - 1)    # gaps at a segment's end
        return m

    # -- one batch ---------------------------------------------------------------------------------
    def filter_batch(self, b: StoredBatch, m: OffsetMap, now: int, delete_retention_ms: int,
                     last_of_active: dict, upper_bound: int, aborted: dict, stats: CleanStats) -> StoredBatch | None:
        """The batch as the cleaned segment keeps it: itself, rebuilt with fewer records, empty, or None."""
        if b.is_control:
            return b
        recs = rb.records_with_offsets(b)
        horizon = rf.delete_horizon(b)
        kept = []
        for r in ([] if _is_aborted(b, aborted) else recs):     # an aborted transaction's records all go
            off, key, value = r[0], r[1], r[2]
            if off > m.latest_offset:
                kept.append(r)
                continue
            if key is None or off < m.offsets.get(key, -1):
                continue
            if value is None and horizon is not None and now >= horizon:
                continue                         # a tombstone past its delete horizon
            kept.append(r)
        stats.records_read += len(recs)
        stats.records_kept += len(kept)
        set_horizon = horizon is None and any(r[2] is None for r in kept)
        if kept and len(kept) == len(recs) and not set_horizon:
            return b
        if kept:
            return StoredBatch.from_proto(rf.filtered_batch(b, kept, now + delete_retention_ms if set_horizon
                                                            else None))
        active = b.producer_id != rb.NO_PRODUCER_ID and last_of_active.get(b.producer_id) == b.last_offset
        if active or b.last_offset + 1 == upper_bound:
            return b if b.record_count == 0 else StoredBatch.from_proto(rf.empty_batch(b))
        return None

    # -- a round -----------------------------------------------------------------------------------
    def clean(self, ltc: LogToClean) -> CleanStats:
        p = ltc.partition
        cfg = p.config
        now = self.time.milliseconds()
        stats = CleanStats(end_offset=ltc.first_dirty)
        with p.lock:
            plog = p.log
            generation = plog.generation
            segments = list(plog.segments)
            last_of_active = {pid: e.batch_metadata[-1].last_offset
                              for pid, e in p.producer_state.producers.items() if e.batch_metadata}
        aborted = _aborted_ranges(p, ltc.first_uncleanable)
        m = self.build_offset_map(segments, ltc.first_dirty, ltc.first_uncleanable, aborted)
        end = m.latest_offset + 1
        if end <= ltc.first_dirty:
            return stats
        for group in group_by_size([s for s in segments[:-1] if s.base_offset < end], cfg.segment_bytes):
            cleaned = self._write_cleaned(group, m, now, cfg.delete_retention_ms, last_of_active, end, aborted,
                                          stats)
            if not self._swap(p, generation, group, cleaned, now + cfg.file_delete_delay_ms):
                stats.aborted = True
                return stats
            stats.groups_swapped += 1
        with p.lock:
            if plog.generation == generation:
                write_cleaner_checkpoint(plog.dir, end)
                stats.end_offset = end
        return stats

    def _write_cleaned(self, group: list, m: OffsetMap, now: int, retention_ms: int, last_of_active: dict,
                       upper_bound: int, aborted: dict, stats: CleanStats) -> str:
        base = group[0].base_offset
        path = os.path.join(os.path.dirname(group[0].path), LogSegment.file_name(base) + CLEANED)
        with open(path, "wb") as f:
            for seg in group:
                for b in _batches(seg):
                    stats.batches_read += 1
                    out = self.filter_batch(b, m, now, retention_ms, last_of_active, upper_bound, aborted, stats)
                    if out is not None:
                        f.write(out.frame())
            f.flush()
            os.fsync(f.fileno())
        return path

    def _swap(self, p, generation: int, group: list, cleaned: str, delete_at_ms: int) -> bool:
        plog = p.log
        directory = plog.dir
        swap = cleaned[:-len(CLEANED)] + SWAP
        with p.lock:
            segs = plog.segments
            try:
                i = next(k for k, s in enumerate(segs) if s is group[0])
            except StopIteration:
                i = -1
            if (plog.generation != generation or i < 0 or segs[i:i + len(group)] != group
                    or i + len(group) >= len(segs)):
                os.remove(cleaned)
                log.info("%s: the log changed while it was cleaned: the round stops", directory)
                return False
            os.rename(cleaned, swap)
            fsync_dir(directory)
            deleted = []
            for seg in group:
                os.rename(seg.path, seg.path + DELETED)
                deleted.append(seg.path + DELETED)
            final = os.path.join(directory, LogSegment.file_name(group[0].base_offset))
            os.rename(swap, final)
            fsync_dir(directory)
            new = LogSegment(final, group[0].base_offset, group[0].created_ms)
            new.recover(group[0].base_offset, validate=False)
            plog.segments = segs[:i] + [new] + segs[i + len(group):]   # a new list: readers keep theirs
            plog.schedule_segment_deletion(group, deleted, delete_at_ms)
        return True


def group_by_size(segments: list, max_size: int) -> list[list]:
    """Consecutive segments whose sizes add up to at most max_size, each group one cleaned segment
    (Kafka's groupSegmentsBySize); a segment larger than max_size is a group alone."""
    groups, i = [], 0
    while i < len(segments):
        group, size = [segments[i]], segments[i].size
        i += 1
        while i < len(segments) and size + segments[i].size <= max_size:
            group.append(segments[i])
            size += segments[i].size
            i += 1
        groups.append(group)
    return groups


class LogCleaner:
    """The broker's cleaner thread (Kafka's CleanerThread): clean the filthiest compacted log, else wait
    log.cleaner.backoff.ms; remove the segment files a swap replaced once their delay is over."""

    def __init__(self, partitions, time: Time = SYSTEM, backoff_ms: int = 15000,
                 dedupe_buffer_size: int = 128 * 1024 * 1024, name: str = "log-cleaner"):
        self.partitions = partitions            # () -> list of Partition
        self.time = time
        self.backoff_ms = backoff_ms
        self.cleaner = Cleaner(time, dedupe_buffer_size)
        self.uncleanable: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "LogCleaner":
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def clean_once(self) -> CleanStats | None:
        """One pass: the filthiest log cleaned (its stats), or None when none needed it."""
        parts = self.partitions()
        now = self.time.milliseconds()
        for p in parts:
            p.log.delete_due_segments(now)
        ltc = grab_filthiest(parts, now, self.uncleanable)
        if ltc is None:
            return None
        try:
            stats = self.cleaner.clean(ltc)
        except Exception:  # noqa: BLE001 - one bad log must not stop the cleaner (Kafka's markPartitionUncleanable)
            key = (ltc.partition.topic, ltc.partition.partition)
            if not ltc.partition.log.closed:
                self.uncleanable.add(key)
                log.exception("%s-%d: cleaning failed: the log is marked uncleanable", *key)
            return None
        log.info("%s-%d: cleaned up to offset %d: %d of %d records kept in %d groups%s", ltc.partition.topic,
                 ltc.partition.partition, stats.end_offset, stats.records_kept, stats.records_read,
                 stats.groups_swapped, " (stopped: the log changed)" if stats.aborted else "")
        return stats

    def _run(self) -> None:
        while not self._stop.is_set():
            stats = self.clean_once()
            if stats is None and self.time.wait_event(self._stop, self.backoff_ms / 1000.0):
                return
