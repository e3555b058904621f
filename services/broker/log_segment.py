"""StoredBatch and LogSegment: one segment file of a partition's log and its in-memory index.

Guarantees: `append` puts a whole frame into the OS page cache before returning (it survives a
SIGKILL of the broker, not a power loss: `flush` fsyncs the file); `recover` indexes the file
from its start and cuts it at the first frame that fails, checking every batch whole (CRC
included) or, for a trusted segment, only that the frame headers chain; `read_from` returns whole
batches only; `truncate_to` drops whole batches; a second `close` does nothing.

Segment file `<20-digit base offset>.log`, one frame per batch (big-endian):
    length u32 | base_offset i64 | partition_leader_epoch i32 | crc u32 | body
where body is record_batch.batch_body(...) and length counts every byte after
the length field. Offsets increase from batch to batch; a batch the log cleaner
rebuilt (record_batch.OFFSET_DELTA_FLAG) may leave gaps, inside it and before
the next one, and may hold no record at all.
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
from dataclasses import dataclass

from eoslab.common import record_batch as rb

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">IqiI")
_BODY = struct.Struct(">hqiiiq")
_HEAD_LEN = _FRAME.size + _BODY.size  # bytes before the records
_DELTA = struct.Struct(">i")          # a cleaned batch's records open with its last offset delta


@dataclass(slots=True)
class StoredBatch:
    base_offset: int
    leader_epoch: int
    crc: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    max_timestamp: int
    records: bytes

    @property
    def last_offset(self) -> int:
        if self.attributes & rb.OFFSET_DELTA_FLAG:       # a cleaned batch: offsets may have gaps
            return self.base_offset + rb.last_offset_delta(self)
        return self.base_offset + self.record_count - 1

    @property
    def last_sequence(self) -> int:
        """Kafka's: base sequence + last offset delta, so a cleaned batch keeps its producer's place."""
        return rb.last_sequence(self.base_sequence, rb.last_offset_delta(self) + 1)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & rb.TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & rb.CONTROL_FLAG)

    @property
    def size_in_bytes(self) -> int:
        """What the batch takes in the log file (its frame), as Kafka's RecordBatch.sizeInBytes."""
        return _FRAME.size + _BODY.size + len(self.records)

    def frame(self) -> bytes:
        body = _BODY.pack(self.attributes, self.producer_id, self.producer_epoch, self.base_sequence,
                          self.record_count, self.max_timestamp)
        length = _FRAME.size - 4 + len(body) + len(self.records)
        return _FRAME.pack(length, self.base_offset, self.leader_epoch, self.crc) + body + self.records

    def valid_crc(self) -> bool:
        return rb.batch_crc(self.attributes, self.producer_id, self.producer_epoch, self.base_sequence,
                            self.record_count, self.max_timestamp, self.records) == self.crc

    def to_proto(self):
        from eoslab.v1 import common_pb2
        return common_pb2.RecordBatch(
            base_offset=self.base_offset, partition_leader_epoch=self.leader_epoch,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence, record_count=self.record_count,
            attributes=self.attributes, max_timestamp=self.max_timestamp, crc=self.crc,
            records=self.records)

    @classmethod
    def from_proto(cls, b) -> "StoredBatch":
        return cls(b.base_offset, b.partition_leader_epoch, b.crc, b.attributes, b.producer_id,
                   b.producer_epoch, b.base_sequence, b.record_count, b.max_timestamp, b.records)


def _parse(buf: bytes, pos: int, check_crc: bool = True) -> tuple[StoredBatch, int] | None:
    """Parse one frame at `pos`; None if torn or corrupt (its CRC checked unless check_crc is
    False). Returns (batch, next position)."""
    if pos + _HEAD_LEN > len(buf):
        return None
    length, base, epoch, crc = _FRAME.unpack_from(buf, pos)
    end = pos + 4 + length
    if length < _HEAD_LEN - 4 or end > len(buf):
        return None
    attrs, pid, pepoch, seq, count, max_ts = _BODY.unpack_from(buf, pos + _FRAME.size)
    b = StoredBatch(base, epoch, crc, attrs, pid, pepoch, seq, count, max_ts,
                    bytes(buf[pos + _HEAD_LEN:end]))
    if _last_delta(attrs, count, buf, pos + _HEAD_LEN, end) is None or (check_crc and not b.valid_crc()):
        return None
    return b, end


def _last_delta(attrs: int, count: int, buf, records_at: int, end: int) -> int | None:
    """The frame's last offset delta, or None when it cannot be one: a dense batch has at least one
    record; a cleaned one (OFFSET_DELTA_FLAG) may have none, and its delta covers its records."""
    if not attrs & rb.OFFSET_DELTA_FLAG:
        return count - 1 if count > 0 else None
    if count < 0 or records_at + _DELTA.size > end:
        return None
    delta = _DELTA.unpack_from(buf, records_at)[0]
    return delta if delta >= max(count - 1, 0) else None


def _parse_header(buf: bytes, pos: int) -> tuple[int, int, int] | None:
    """Read one frame's header at `pos` without checking its CRC (a trusted segment): (base offset,
    last offset, next position, max timestamp), or None if the frame does not fit or is malformed."""
    if pos + _HEAD_LEN > len(buf):
        return None
    length, base, _epoch, _crc = _FRAME.unpack_from(buf, pos)
    end = pos + 4 + length
    if length < _HEAD_LEN - 4 or end > len(buf):
        return None
    body = _BODY.unpack_from(buf, pos + _FRAME.size)
    delta = _last_delta(body[0], body[4], buf, pos + _HEAD_LEN, end)
    if delta is None:
        return None
    return base, base + delta, end, body[5]


class LogSegment:
    """One segment file plus its in-memory index of batch base offsets and positions."""

    def __init__(self, path: str, base_offset: int, created_ms: int = 0):
        self.path = path
        self.base_offset = base_offset
        self.bases: list[int] = []
        self.lasts: list[int] = []
        self.positions: list[int] = []
        self.size = 0
        self.created_ms = created_ms     # when this process opened or made it (Kafka's LogSegment.created)
        self.first_timestamp: int | None = None   # the first batch's max timestamp (Kafka's rollingBasedTimestamp)
        self.largest_timestamp = -1      # the largest batch max timestamp (Kafka's largestTimestamp)
        self._f = open(path, "ab")
        self._rfd = os.open(path, os.O_RDONLY)

    @staticmethod
    def file_name(base_offset: int) -> str:
        return f"{base_offset:020d}.log"

    def recover(self, expected_next: int, validate: bool = True) -> tuple[int, int]:
        """Scan the file, index every batch, cut the file at the first frame that fails.

        validate=True checks every batch whole, CRC included (Kafka's LogSegment.recover);
        validate=False reads the frame headers only (a trusted segment: below the recovery point
        or after a clean shutdown, where Kafka reads nothing) and cuts only where the headers no
        longer chain. Returns (next offset, bytes cut)."""
        with open(self.path, "rb") as f:
            buf = f.read()
        pos, nxt = 0, expected_next
        while pos < len(buf):
            if validate:
                parsed = _parse(buf, pos)
                if parsed is None:
                    break
                b, end = parsed
                base, last = b.base_offset, b.last_offset
                max_ts = b.max_timestamp
            else:
                head = _parse_header(buf, pos)
                if head is None:
                    break
                base, last, end, max_ts = head
            if base < nxt:
                break
            self._stamp(max_ts)
            self.bases.append(base)
            self.lasts.append(last)
            self.positions.append(pos)
            nxt = last + 1
            pos = end
        cut = len(buf) - pos
        if cut:
            log.warning("%s: cutting %d bytes of torn or corrupt tail at position %d (offset %d)",
                        self.path, cut, pos, nxt)
            self._f.truncate(pos)
        self.size = pos
        return nxt, cut

    def flush(self) -> None:
        """fsync the segment file (Kafka's LogSegment.flush)."""
        self._f.flush()
        os.fsync(self._f.fileno())

    def _stamp(self, max_timestamp: int) -> None:
        if not self.bases:
            self.first_timestamp = max_timestamp
        self.largest_timestamp = max(self.largest_timestamp, max_timestamp)

    def time_waited_for_roll(self, now_ms: int, batch_max_timestamp: int) -> int:
        """How long this segment has been taking batches, by the record timestamps where its first batch has
        one (the new batch's max timestamp minus the first's), else by the clock since it was made (Kafka's
        LogSegment.timeWaitedForRoll)."""
        if self.first_timestamp is not None and self.first_timestamp >= 0:
            return batch_max_timestamp - self.first_timestamp
        return now_ms - self.created_ms

    def append(self, batch: StoredBatch) -> None:
        self._stamp(batch.max_timestamp)
        frame = batch.frame()
        self._f.write(frame)
        self._f.flush()  # into the page cache: survives a SIGKILL of this process
        self.bases.append(batch.base_offset)
        self.lasts.append(batch.last_offset)
        self.positions.append(self.size)
        self.size += len(frame)

    def read_from(self, offset: int, max_bytes: int, max_offset: int, check_crc: bool = True,
                  min_one: bool = True) -> tuple[list[StoredBatch], int, bool]:
        """Whole batches holding offsets >= offset, below max_offset, that fit in max_bytes together,
        the bytes they take in the file (what max_bytes is counted against), and whether a batch
        was left out for want of room. With min_one the first batch comes whatever its size (Kafka's
        minOneMessage, so a consumer never stalls on a batch larger than its limit). A batch that
        does not parse (or, with check_crc, fails its CRC) raises IOError."""
        i = bisect.bisect_right(self.bases, offset) - 1
        if i < 0:
            i = 0
        if i < len(self.lasts) and self.lasts[i] < offset:
            i += 1
        out, total = [], 0
        while i < len(self.bases) and self.lasts[i] < max_offset:
            start = self.positions[i]
            end = self.positions[i + 1] if i + 1 < len(self.positions) else self.size
            if total + (end - start) > max_bytes and (out or not min_one):
                return out, total, True
            buf = os.pread(self._rfd, end - start, start)
            parsed = _parse(buf, 0, check_crc)
            if parsed is None:
                raise IOError(f"{self.path}: unreadable batch at position {start}")
            out.append(parsed[0])
            total += end - start
            i += 1
        return out, total, False

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= offset (whole batches only)."""
        i = bisect.bisect_left(self.lasts, offset)
        if i < len(self.bases) and self.bases[i] < offset:
            i += 1  # a batch straddling the offset stays; callers truncate at batch edges
        pos = self.positions[i] if i < len(self.positions) else self.size
        del self.bases[i:], self.lasts[i:], self.positions[i:]
        if not self.bases:
            self.first_timestamp, self.largest_timestamp = None, -1
        self._f.truncate(pos)
        self.size = pos

    def close(self) -> None:
        """Close the segment's files; a second close does nothing (its descriptor number may
        belong to another file by then)."""
        self._f.close()
        rfd, self._rfd = self._rfd, -1
        if rfd >= 0:
            os.close(rfd)
