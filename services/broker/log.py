"""UnifiedLog and LogSegment: a partition's log as segment files on disk.

Guarantees:
- a batch returned by `append` is in the OS page cache before the call returns, so it survives a
  SIGKILL of the broker; it is on disk (fsynced) only once the log is flushed, as in Kafka, which
  does not fsync each write by default. The log is flushed (segments fsynced up to the log end,
  and the directory when a segment file is new) when flush.messages or more messages are
  unflushed after an append, when the log flusher finds flush.ms passed (`flush_if_due`), up to
  the new segment's base when a segment rolls, and wholly on a clean close;
- `recovery_point`: every offset below it is on disk; it moves only by a flush (or down with a
  truncation), and is written to `recovery-point-offset-checkpoint` by
  `checkpoint_recovery_point`, on a truncation below it and on a clean close;
- opening a log after an unclean shutdown validates the batches from the segment holding the
  checkpointed recovery point onward, cuts the log at the first torn or corrupt batch and deletes
  the segments after it (log_recovery.py; `recovery` says how much was cut); after a clean close
  (`close(clean=True)`, which leaves `.kafka_cleanshutdown`) nothing is validated;
- offsets increase; the log cleaner may leave gaps below the active segment, and swaps a cleaned
  segment in as a new `segments` list (a read that took the old list finishes in it: replaced
  segments close only after file.delete.delay.ms, `delete_due_segments`); `generation` moves with
  every change that removes or rewrites batches (truncation, log start, close), so a cleaning
  round started before it does not swap. `read` returns whole batches only.

Segment files and their frames: log_segment.py. See docs/durability.md.
"""
from __future__ import annotations

import bisect
import logging
import os

from eoslab.common import record_batch as rb
from eoslab.common.time import SYSTEM, Time
from services.broker.checkpoints import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                         consume_clean_shutdown_marker, fsync_dir,
                                         read_offset_checkpoint, write_clean_shutdown_marker,
                                         write_offset_checkpoint)
from services.broker.log_cleaner_manager import read_cleaner_checkpoint, write_cleaner_checkpoint
from services.broker.log_config import FLUSH_NEVER
from services.broker.log_recovery import LoadResult, load_segments
from services.broker.log_segment import LogSegment, StoredBatch

__all__ = ["FLUSH_NEVER", "LogSegment", "StoredBatch", "UnifiedLog"]

log = logging.getLogger(__name__)


class UnifiedLog:
    """A partition's log: segments in a directory, appends at the end, reads by offset, flushed by
    its flush policy, recovered from its recovery point when opened after an unclean shutdown."""

    def __init__(self, directory: str, segment_bytes: int = 16 * 1024 * 1024,
                 flush_messages: int = FLUSH_NEVER, flush_ms: int = FLUSH_NEVER, time: Time = SYSTEM,
                 segment_ms: int = 604800000):
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms           # Kafka's segment.ms: roll by time
        self.flush_messages = flush_messages   # Kafka's flush.messages
        self.flush_ms = flush_ms               # Kafka's flush.ms
        self.time = time
        os.makedirs(directory, exist_ok=True)
        self.segments: list[LogSegment] = []
        self.log_end_offset = 0
        self.recovery_point = 0                # every offset below it is on disk (fsynced)
        self.last_flush_ms = time.milliseconds()
        self.flush_also = None                 # () -> None: files synced with every flush (txn index)
        self.recovery_point_path = os.path.join(directory, RECOVERY_POINT_CHECKPOINT)
        self.log_start_offset_path = os.path.join(directory, LOG_START_OFFSET_CHECKPOINT)
        self._log_start_offset = 0
        self.had_clean_shutdown = False
        self.recovery: LoadResult | None = None
        self.generation = 0                    # moves when batches are removed: a cleaning round then stops
        self.closed = False
        self._pending_deletes: list[tuple[int, list[LogSegment], list[str]]] = []   # (due ms, segments, files)
        self._load()

    def _load(self) -> None:
        self.had_clean_shutdown = consume_clean_shutdown_marker(self.dir)
        checkpointed = read_offset_checkpoint(self.recovery_point_path)
        complete_interrupted_swaps(self.dir)
        names = sorted(n for n in os.listdir(self.dir) if n.endswith(".log") and n[:-4].isdigit())
        segs = [self._segment(int(n[:-4])) for n in names]
        res = load_segments(segs, checkpointed, self.had_clean_shutdown)
        self.recovery = res
        self.segments = res.segments
        if res.bytes_cut:
            log.warning("%s: opening the log after %s shutdown cut %d bytes and %d later segments: it now ends "
                        "at offset %d (recovery point %d, %d segments validated)", self.dir,
                        "a clean" if self.had_clean_shutdown else "an unclean", res.bytes_cut,
                        res.segments_deleted, res.next_offset, checkpointed, res.segments_validated)
        elif not self.had_clean_shutdown and segs:
            log.info("%s: recovered %d segments from recovery point %d after an unclean shutdown: nothing cut",
                     self.dir, res.segments_validated, checkpointed)
        if not self.segments:
            self.segments.append(self._segment(0))
        self.log_end_offset = res.next_offset
        self.recovery_point = res.recovery_point
        self._rp_checkpointed = checkpointed
        # the first segment's base, not its first batch: a cleaned segment may no longer hold its first
        # offsets, and the log start stays where it was (Kafka's LogLoader)
        self._log_start_offset = min(max(read_offset_checkpoint(self.log_start_offset_path),
                                         self.segments[0].base_offset), self.log_end_offset)
        if self.recovery_point < checkpointed:   # never leave a checkpoint above the log's own end
            self.checkpoint_recovery_point()

    def _segment(self, base: int) -> LogSegment:
        return LogSegment(os.path.join(self.dir, LogSegment.file_name(base)), base, self.time.milliseconds())

    @property
    def recovered_bytes_cut(self) -> bool:
        """Whether opening the log cut anything (see `recovery` for how much)."""
        return bool(self.recovery and self.recovery.bytes_cut)

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for: the first segment's first batch, or higher after
        DeleteRecords (Kafka's logStartOffset, kept in `log-start-offset-checkpoint`)."""
        return self._log_start_offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to `offset` (at most the log end): checkpointed at once, and
        every segment wholly below it deleted, never the active one (Kafka's
        maybeIncrementLogStartOffset and deleteLogStartOffsetBreachedSegments). Answers whether it moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self.generation += 1
        self._log_start_offset = offset
        write_offset_checkpoint(self.log_start_offset_path, offset)
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            seg = self.segments.pop(0)
            seg.close()
            os.remove(seg.path)
        return True

    def schedule_segment_deletion(self, segments: list[LogSegment], files: list[str], due_ms: int) -> None:
        """Segments a cleaned one replaced: closed, and their `.deleted` files removed, at `due_ms`."""
        self._pending_deletes.append((due_ms, segments, files))

    def delete_due_segments(self, now_ms: int | None) -> None:
        """Close and remove the replaced segments whose delay is over (all of them with None)."""
        due = [d for d in list(self._pending_deletes) if now_ms is None or d[0] <= now_ms]
        for d in due:
            try:
                self._pending_deletes.remove(d)
            except ValueError:          # the cleaner thread and a close took it at once: the other one does it
                continue
            for seg in d[1]:
                seg.close()
            for path in d[2]:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at `offset` (Kafka's truncateFullyAndStartAt: a follower
        whose log ends below the leader's log start offset)."""
        self.generation += 1
        for seg in self.segments:
            seg.close()
            os.remove(seg.path)
        self.segments = [self._segment(offset)]
        fsync_dir(self.dir)
        self.log_end_offset = self.recovery_point = self._log_start_offset = offset
        write_offset_checkpoint(self.log_start_offset_path, offset)
        self.checkpoint_recovery_point()

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def append(self, batch: StoredBatch) -> None:
        """Append a batch whose base_offset the caller set to log_end_offset (a leader's) or above it (a
        follower's copy of a cleaned log, which may have gaps); flush when flush.messages or more
        messages are unflushed (Kafka's UnifiedLog.append)."""
        if batch.base_offset < self.log_end_offset:
            raise ValueError(f"append at {batch.base_offset}, log ends at {self.log_end_offset}")
        active = self.segments[-1]
        if active.bases and (active.size >= self.segment_bytes or active.time_waited_for_roll(
                self.time.milliseconds(), batch.max_timestamp) > self.segment_ms):
            active = self._roll(batch.base_offset)
        active.append(batch)
        self.log_end_offset = batch.last_offset + 1
        if self.log_end_offset - self.recovery_point >= self.flush_messages:
            self.flush()

    def _roll(self, base: int) -> LogSegment:
        """Start a new active segment at `base`, the next batch's base offset, and flush everything before
        it (Kafka's roll, which schedules flushUptoOffsetExclusive(new base) at once; done here before
        returning)."""
        seg = self._segment(base)
        self.segments.append(seg)
        self.flush(seg.base_offset)
        return seg

    def flush(self, offset: int | None = None, include_active: bool = False) -> None:
        """fsync every segment holding offsets in [recovery point, offset) (default: up to the log
        end), and the directory when one of them was created since the last flush; the recovery
        point becomes `offset` (Kafka's UnifiedLog.flush / LocalLog.flush). include_active also
        syncs the segment holding `offset` itself, even empty (Kafka's flush(true), on close)."""
        offset = self.log_end_offset if offset is None else offset
        flush_to = offset + 1 if include_active else offset
        rp = self.recovery_point
        if flush_to <= rp:
            return
        new_file = False
        for i, seg in enumerate(self.segments):
            following = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if following is not None and following <= rp:
                continue                     # wholly below the recovery point: already synced
            if seg.base_offset >= flush_to:
                break
            seg.flush()
            new_file = new_file or seg.base_offset >= rp
        if self.flush_also is not None:
            self.flush_also()
        if new_file:
            fsync_dir(self.dir)
        if offset > self.recovery_point:
            self.recovery_point = offset
            self.last_flush_ms = self.time.milliseconds()

    def flush_if_due(self) -> bool:
        """The log flusher's check (Kafka's LogManager.flushDirtyLogs): flush when flush.ms or more
        has passed since the last flush. Returns whether it flushed."""
        if self.time.milliseconds() - self.last_flush_ms < self.flush_ms:
            return False
        self.flush()
        return True

    def checkpoint_recovery_point(self) -> None:
        """Write the recovery point to its checkpoint when it moved since the last write (Kafka's
        LogManager.checkpointLogRecoveryOffsets); an OSError is the caller's to report."""
        rp = self.recovery_point
        if rp != self._rp_checkpointed:
            write_offset_checkpoint(self.recovery_point_path, rp)
            self._rp_checkpointed = rp

    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None,
             check_crc: bool = True, min_one: bool = True) -> list[StoredBatch]:
        """Whole batches from `offset` (the batch holding it first) whose last offset is below max_offset
        and that fit in max_bytes together; with min_one the first batch whatever its size (Kafka's
        LogSegment.read with minOneMessage)."""
        limit = self.log_end_offset if max_offset is None else max_offset
        out: list[StoredBatch] = []
        segments = self.segments        # one list: the cleaner swaps in a new one
        i = max(0, bisect.bisect_right([s.base_offset for s in segments], offset) - 1)
        for seg in segments[i:]:
            got, used, full = seg.read_from(offset, max_bytes, limit, check_crc, min_one and not out)
            out.extend(got)
            max_bytes -= used
            if got:
                offset = got[-1].last_offset + 1
            if full or max_bytes <= 0 or offset >= limit:
                break
        return out

    def batches(self, from_offset: int = 0):
        """Every batch from `from_offset` to the end, segment by segment, CRCs unchecked: what a
        rebuild of the producer state reads (as Kafka's, which reads a trusted segment's corrupt
        batch by its header; a fetch of it fails its CRC check)."""
        off = from_offset
        while off < self.log_end_offset:
            got = self.read(off, 4 << 20, check_crc=False)
            if not got:
                return
            yield from got
            off = got[-1].last_offset + 1

    def legacy_fetch_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (Kafka's legacyFetchOffsetsBefore): the base offsets of the segments last
        modified at or before `timestamp` (-1: from the log end, -2: from the log start), and the log end
        where the active segment holds anything (modified now), newest first, at most
        `max_num_offsets`. It reads the segment list it finds (a swap replaces the list, never changes
        it) and the files' modification times with no lock held."""
        segments, start_offset, end_offset = self.segments, self.log_start_offset, self.log_end_offset
        marks = [(max(s.base_offset, start_offset), _modified_ms(s.path)) for s in segments]
        if segments and segments[-1].size > 0:
            marks.append((end_offset, self.time.milliseconds()))
        if timestamp == -1:
            start = len(marks) - 1
        elif timestamp == -2:
            start = 0
        else:
            start = len(marks) - 1
            while start >= 0 and marks[start][1] > timestamp:
                start -= 1
        return sorted((marks[i][0] for i in range(start, start - min(max_num_offsets, start + 1), -1)),
                      reverse=True)

    def fetch_offset_by_timestamp(self, target: int, below: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, the batch's leader epoch) for ListOffsets (Kafka's UnifiedLog.fetchOffsetByTimestamp) among offsets
        below `below` (the last fetchable offset): target >= 0, the first record whose timestamp is at
        least target; MAX_TIMESTAMP (-3), the first record with the log's largest timestamp. None when
        no such record is below `below`. Control records count, as in Kafka's time index."""
        best = None
        for b in self.batches(self.log_start_offset):
            if b.base_offset >= below:
                break
            if target >= 0 and b.max_timestamp < target:
                continue
            if target < 0 and best is not None and b.max_timestamp <= best[0]:
                continue
            try:
                stamps = [(r[0], r[3]) for r in rb.records_with_offsets(b)]
            except ValueError:      # records that do not decode: this batch answers nothing
                continue
            for off, ts in stamps:
                if off >= below:
                    break
                if target >= 0 and ts >= target:
                    return ts, off, b.leader_epoch
                if target < 0 and (best is None or ts > best[0]):
                    best = (ts, off, b.leader_epoch)
        return best

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after `offset` (log end becomes <= offset). A recovery point
        above the new end comes down to it and is checkpointed at once (Kafka's LogManager.truncateTo),
        so the checkpoint never vouches for offsets written again after the truncation."""
        self.generation += 1
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments.pop()
            seg.close()
            os.remove(seg.path)
        self.segments[-1].truncate_to(offset)
        seg = self.segments[-1]
        self.log_end_offset = seg.lasts[-1] + 1 if seg.lasts else seg.base_offset
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        cleaned_to = read_cleaner_checkpoint(self.dir)
        if cleaned_to > self.log_end_offset:     # Kafka's maybeTruncateCheckpoint: what comes again is dirty
            write_cleaner_checkpoint(self.dir, self.segments[-1].base_offset)
        if self.recovery_point > self.log_end_offset:
            self.recovery_point = self.log_end_offset
            self.checkpoint_recovery_point()

    def close(self, clean: bool = False) -> None:
        """Close the segment files. clean=True is a clean shutdown (Kafka's LogManager.shutdown):
        flush everything first, checkpoint the recovery point (now the log end), then write the
        clean-shutdown marker, so the next open skips recovery. Without it nothing is synced: the
        next open recovers from the checkpointed recovery point, as after a crash."""
        self.generation += 1
        self.closed = True
        if clean:
            self.flush(include_active=True)
        for s in self.segments:
            s.close()
        self.delete_due_segments(None)
        if clean:
            self.checkpoint_recovery_point()
            write_clean_shutdown_marker(self.dir)


def complete_interrupted_swaps(directory: str) -> None:
    """Finish what a crash interrupted in the log cleaner's swap (Kafka's LogLoader): `.cleaned` and
    `.deleted` files go; a `.log.swap` replaces every segment whose base falls in its offset range and
    becomes the segment."""
    names = os.listdir(directory)
    for n in names:
        if n.endswith(".log.cleaned") or n.endswith(".log.deleted"):
            os.remove(os.path.join(directory, n))
    swaps = sorted(n for n in names if n.endswith(".log.swap") and n[:-9].isdigit())
    for n in swaps:
        base = int(n[:-9])
        seg = LogSegment(os.path.join(directory, n), base)
        nxt, _ = seg.recover(base, validate=True)
        seg.close()
        for other in os.listdir(directory):
            if other.endswith(".log") and other[:-4].isdigit() and base <= int(other[:-4]) < max(nxt, base + 1):
                log.warning("%s: removing %s, which an interrupted cleaning replaced", directory, other)
                os.remove(os.path.join(directory, other))
        os.rename(os.path.join(directory, n), os.path.join(directory, n[:-5]))
        log.warning("%s: completed the interrupted swap of cleaned segment %s", directory, n[:-5])
    if swaps:
        fsync_dir(directory)


def _modified_ms(path: str) -> int:
    """A segment file's modification time in ms; 0 for a file deleted since the list was read."""
    try:
        return int(os.path.getmtime(path) * 1000)
    except OSError:
        return 0
