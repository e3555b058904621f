"""TransactionIndex (Kafka's aborted-transaction index) and control records.

Guarantees:
- every ABORT marker appended to a partition's log (leader, follower or log
  recovery) adds one entry (producer id, first offset, last offset = the
  marker's offset, last stable offset at the time) to the partition's
  `aborted.txnindex` file before the append returns; entries are kept in
  marker-offset order and an entry is never added twice (recovery replays
  markers the file already holds);
- the index is a function of the log: opening it drops entries for markers
  at or beyond the log end, and `truncate_to` drops entries for markers cut
  from the log, so it never names a transaction the log does not hold;
- `collect(start, end)` returns exactly the aborted transactions a
  read_committed reader of offsets [start, end) must know about: those whose
  marker is at or after `start` and whose first offset is before `end`.

File layout: 32-byte big-endian entries: producer_id i64 | first_offset i64 |
last_offset i64 | last_stable_offset i64.

Control records (one per control batch, as in Kafka) are read and written by
eoslab.common.control_records.
"""
from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass

_ENTRY = struct.Struct(">qqqq")
FILE_NAME = "aborted.txnindex"


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int     # -1: the producer wrote nothing to this partition in the transaction
    last_offset: int      # the marker's offset
    is_aborted: bool


class TransactionIndex:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, FILE_NAME)
        self.entries: list[AbortedTxn] = []
        self._lasts: list[int] = []
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                raw = f.read()
            for i in range(0, len(raw) - len(raw) % _ENTRY.size, _ENTRY.size):
                e = AbortedTxn(*_ENTRY.unpack_from(raw, i))
                if not self._lasts or e.last_offset > self._lasts[-1]:
                    self.entries.append(e)
                    self._lasts.append(e.last_offset)
        self._f = open(self.path, "ab")

    @property
    def last_offset(self) -> int:
        return self._lasts[-1] if self._lasts else -1

    def append(self, e: AbortedTxn) -> None:
        if e.last_offset <= self.last_offset:
            return   # already indexed (log recovery replays markers the file holds)
        self._f.write(_ENTRY.pack(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset))
        self._f.flush()
        self.entries.append(e)
        self._lasts.append(e.last_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose marker is at or after `offset`."""
        i = bisect.bisect_left(self._lasts, offset)
        if i == len(self.entries):
            return
        del self.entries[i:], self._lasts[i:]
        self._f.close()
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            for e in self.entries:
                f.write(_ENTRY.pack(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._f = open(self.path, "ab")

    def collect(self, start: int, end: int) -> list[AbortedTxn]:
        i = bisect.bisect_left(self._lasts, start)
        return [e for e in self.entries[i:] if e.first_offset < end]

    def close(self) -> None:
        self._f.close()
