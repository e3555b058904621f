"""UnifiedLog and LogSegment: a partition's log as segment files on disk.

Guarantees: a batch returned by `append` is in the OS page cache before the
call returns, so it survives a SIGKILL of the broker; opening a log recovers
it: a torn frame or a CRC mismatch at the tail is cut off together with
everything after it, and the log then ends at the last whole, valid batch.
Offsets are dense and increasing; `read` returns whole batches only.

Segment file `<20-digit base offset>.log`, one frame per batch (big-endian):
    length u32 | base_offset i64 | partition_leader_epoch i32 | crc u32 | body
where body is record_batch.batch_body(...) and length counts every byte after
the length field.
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
        return self.base_offset + self.record_count - 1

    @property
    def last_sequence(self) -> int:
        return rb.last_sequence(self.base_sequence, self.record_count)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & rb.TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & rb.CONTROL_FLAG)

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


def _parse(buf: bytes, pos: int) -> tuple[StoredBatch, int] | None:
    """Parse one frame at `pos`; None if torn or corrupt. Returns (batch, next position)."""
    if pos + _HEAD_LEN > len(buf):
        return None
    length, base, epoch, crc = _FRAME.unpack_from(buf, pos)
    end = pos + 4 + length
    if length < _HEAD_LEN - 4 or end > len(buf):
        return None
    attrs, pid, pepoch, seq, count, max_ts = _BODY.unpack_from(buf, pos + _FRAME.size)
    b = StoredBatch(base, epoch, crc, attrs, pid, pepoch, seq, count, max_ts,
                    bytes(buf[pos + _HEAD_LEN:end]))
    if count <= 0 or not b.valid_crc():
        return None
    return b, end


class LogSegment:
    """One segment file plus its in-memory index of batch base offsets and positions."""

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.bases: list[int] = []
        self.lasts: list[int] = []
        self.positions: list[int] = []
        self.size = 0
        self._f = open(path, "ab")
        self._rfd = os.open(path, os.O_RDONLY)

    @staticmethod
    def file_name(base_offset: int) -> str:
        return f"{base_offset:020d}.log"

    def recover(self, expected_next: int) -> tuple[int, bool]:
        """Scan the file, index every valid batch, cut a torn/corrupt tail.

        Returns (next offset, whether the file was cut)."""
        with open(self.path, "rb") as f:
            buf = f.read()
        pos, nxt = 0, expected_next
        while pos < len(buf):
            parsed = _parse(buf, pos)
            if parsed is None or parsed[0].base_offset < nxt:
                break
            b, end = parsed
            self.bases.append(b.base_offset)
            self.lasts.append(b.last_offset)
            self.positions.append(pos)
            nxt = b.last_offset + 1
            pos = end
        cut = pos < len(buf)
        if cut:
            log.warning("%s: cutting %d bytes of torn or corrupt tail at position %d",
                        self.path, len(buf) - pos, pos)
            self._f.truncate(pos)
        self.size = pos
        return nxt, cut

    def append(self, batch: StoredBatch) -> None:
        frame = batch.frame()
        self._f.write(frame)
        self._f.flush()  # into the page cache: survives a SIGKILL of this process
        self.bases.append(batch.base_offset)
        self.lasts.append(batch.last_offset)
        self.positions.append(self.size)
        self.size += len(frame)

    def read_from(self, offset: int, max_bytes: int, max_offset: int) -> tuple[list[StoredBatch], int]:
        """Whole batches holding offsets >= offset, below max_offset, about max_bytes (at least one),
        and the bytes they take in the file (what max_bytes is counted against)."""
        i = bisect.bisect_right(self.bases, offset) - 1
        if i < 0:
            i = 0
        if i < len(self.lasts) and self.lasts[i] < offset:
            i += 1
        out, total = [], 0
        while i < len(self.bases) and self.lasts[i] < max_offset:
            start = self.positions[i]
            end = self.positions[i + 1] if i + 1 < len(self.positions) else self.size
            buf = os.pread(self._rfd, end - start, start)
            parsed = _parse(buf, 0)
            if parsed is None:
                raise IOError(f"{self.path}: unreadable batch at position {start}")
            out.append(parsed[0])
            total += end - start
            i += 1
            if total >= max_bytes:
                break
        return out, total

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= offset (whole batches only)."""
        i = bisect.bisect_left(self.lasts, offset)
        if i < len(self.bases) and self.bases[i] < offset:
            i += 1  # a batch straddling the offset stays; callers truncate at batch edges
        pos = self.positions[i] if i < len(self.positions) else self.size
        del self.bases[i:], self.lasts[i:], self.positions[i:]
        self._f.truncate(pos)
        self.size = pos

    def close(self) -> None:
        """Close the segment's files; a second close does nothing (its descriptor number may
        belong to another file by then)."""
        self._f.close()
        rfd, self._rfd = self._rfd, -1
        if rfd >= 0:
            os.close(rfd)


class UnifiedLog:
    """A partition's log: segments in a directory, appends at the end, reads by offset."""

    def __init__(self, directory: str, segment_bytes: int = 16 * 1024 * 1024):
        self.dir = directory
        self.segment_bytes = segment_bytes
        os.makedirs(directory, exist_ok=True)
        self.segments: list[LogSegment] = []
        self.log_end_offset = 0
        self.recovered_bytes_cut = False
        self._load()

    def _load(self) -> None:
        names = sorted(n for n in os.listdir(self.dir) if n.endswith(".log"))
        nxt = 0
        for idx, name in enumerate(names):
            base = int(name[:-4])
            seg = LogSegment(os.path.join(self.dir, name), base)
            nxt, cut = seg.recover(max(nxt, base) if idx else base)
            self.segments.append(seg)
            if cut:
                self.recovered_bytes_cut = True
                for later in names[idx + 1:]:
                    log.warning("%s: removing segment %s after a corrupt tail", self.dir, later)
                    os.remove(os.path.join(self.dir, later))
                break
        if not self.segments:
            self.segments.append(LogSegment(os.path.join(self.dir, LogSegment.file_name(0)), 0))
            nxt = 0
        self.log_end_offset = nxt

    @property
    def log_start_offset(self) -> int:
        s = self.segments[0]
        return s.bases[0] if s.bases else s.base_offset

    def append(self, batch: StoredBatch) -> None:
        """Append a batch whose base_offset the caller set to log_end_offset."""
        if batch.base_offset != self.log_end_offset:
            raise ValueError(f"append at {batch.base_offset}, log ends at {self.log_end_offset}")
        active = self.segments[-1]
        if active.size >= self.segment_bytes and active.bases:
            active = LogSegment(os.path.join(self.dir, LogSegment.file_name(self.log_end_offset)),
                                self.log_end_offset)
            self.segments.append(active)
        active.append(batch)
        self.log_end_offset = batch.last_offset + 1

    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None) -> list[StoredBatch]:
        """Batches from `offset` (the batch holding it first) whose last offset is below max_offset."""
        limit = self.log_end_offset if max_offset is None else max_offset
        out: list[StoredBatch] = []
        i = max(0, bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1)
        for seg in self.segments[i:]:
            got, used = seg.read_from(offset, max_bytes, limit)
            out.extend(got)
            max_bytes -= used              # as read_from counts it: a segment cut short leaves none over
            if got:
                offset = got[-1].last_offset + 1
            if max_bytes <= 0 or offset >= limit:
                break
        return out

    def batches(self, from_offset: int = 0):
        """Every batch from `from_offset` to the end, segment by segment."""
        off = from_offset
        while off < self.log_end_offset:
            got = self.read(off, 4 << 20)
            if not got:
                return
            yield from got
            off = got[-1].last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after `offset` (log end becomes <= offset)."""
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments.pop()
            seg.close()
            os.remove(seg.path)
        self.segments[-1].truncate_to(offset)
        seg = self.segments[-1]
        self.log_end_offset = seg.lasts[-1] + 1 if seg.lasts else seg.base_offset

    def close(self) -> None:
        for s in self.segments:
            s.close()
