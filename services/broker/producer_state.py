"""ProducerStateManager, ProducerStateEntry, BatchMetadata, ProducerAppendInfo.

Guarantees, per partition and producer id:
- the last N batches (a broker setting, default 5) are remembered with their
  offsets, so a retried batch is recognised and gets its original offsets;
- a batch is accepted only in sequence: epoch check first (a lower epoch is
  INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0), then the
  sequence check (a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; a duplicate older
  than the cache is DUPLICATE_SEQUENCE_NUMBER, or OUT_OF_ORDER_SEQUENCE_NUMBER
  as modern Kafka answers, by setting); a producer whose entry holds no
  batch (a marker at a new epoch cleared it) restarts at sequence 0;
- a producer the partition has no state for may start at a sequence other
  than 0 as its Kafka generation says (`unknown_producer`):
  OUT_OF_ORDER_SEQUENCE_NUMBER (0.11), UNKNOWN_PRODUCER_ID (1.0 to 2.4) or
  accepted (KIP-360, 2.5 and later);
- a non-transactional batch from a producer with an open transaction on
  the partition is INVALID_TXN_STATE (Kafka's ProducerAppendInfo);
- KIP-890 part 1: a verification guard taken before the leader asks the
  coordinator is cleared by the producer's next marker or transactional
  append; the append after the verification goes ahead only while the same
  guard is still in place, so a marker that lands in between cannot be
  followed by a batch that reopens a finished transaction;
- transactions (KIP-98): a transactional batch opens the producer's
  transaction on this partition (`current_txn_first_offset`) unless one is
  open; a COMMIT/ABORT control batch closes it, raises the entry's epoch to
  the marker's and records the coordinator epoch that wrote it; an ABORT
  goes into the aborted-transaction index (txn_index.py);
- a producer idle for producer.id.expiration.ms or longer without an open
  transaction is forgotten, as Kafka's isProducerExpired: a late retry of its
  last batch is then not recognised as a duplicate
  (`remove_expired_producers`). Idle since its last batch or marker (each
  sets Kafka's lastTimestamp), counted in milliseconds of the broker's
  monotonic clock where Kafka reads the batches' timestamps: the `Time` the
  manager was given, passed to every ProducerStateEntry;
- the state is a function of the log: `snapshot` writes it to disk atomically
  (open transactions included) and `load` rebuilds it from the newest valid
  snapshot at or below the log end plus the batches after it (or from the
  whole log), on leaders and followers alike.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import zlib
from dataclasses import dataclass

from eoslab.common import record_batch as rb
from eoslab.common.time import SYSTEM, Time
from eoslab.common import control_records
from services.broker import txn_index
from eoslab.common.errors import E

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        s = self.last_seq - self.offset_delta
        return s + rb.MAX_SEQUENCE + 1 if s < 0 else s

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "batch_metadata", "coordinator_epoch",
                 "current_txn_first_offset", "last_timestamp", "last_update_ms", "time")

    def __init__(self, producer_id: int, producer_epoch: int, retain: int,
                 coordinator_epoch: int = -1, current_txn_first_offset: int | None = None, time: Time = SYSTEM):
        self.time = time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batch_metadata: collections.deque[BatchMetadata] = collections.deque(maxlen=retain)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset
        self.last_timestamp = -1
        self.last_update_ms = 0
        self.touch()

    def touch(self) -> None:
        """The producer wrote now (for producer.id.expiration.ms: monotonic ms of the broker's clock)."""
        self.last_update_ms = self.time.nanoseconds() // 1_000_000

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else rb.NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else rb.NO_SEQUENCE

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for b in self.batch_metadata:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp
        self.touch()

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch

    def to_json(self) -> dict:
        return {"pid": self.producer_id, "epoch": self.producer_epoch,
                "coordinator_epoch": self.coordinator_epoch,
                "txn_first_offset": self.current_txn_first_offset,
                "batches": [[b.last_seq, b.last_offset, b.offset_delta, b.timestamp]
                            for b in self.batch_metadata]}


class ProducerStateError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == rb.MAX_SEQUENCE)


class ProducerAppendInfo:
    """Validates one client batch against a producer's entry: check epoch, then check sequence."""

    def __init__(self, manager: "ProducerStateManager", producer_id: int,
                 current: ProducerStateEntry | None):
        self.manager = manager
        self.producer_id = producer_id
        self.current = current

    def check(self, producer_epoch: int, first_seq: int, record_count: int, transactional: bool = False) -> None:
        cur = self.current
        if cur is None:
            if first_seq != 0 and self.manager.unknown_producer != "accept":
                code = E.Value(self.manager.unknown_producer)
                raise ProducerStateError(
                    code, f"producer {self.producer_id} is unknown to this partition and sent sequence {first_seq}")
            if not self.manager.producer_id_known(self.producer_id):
                raise ProducerStateError(
                    E.UNKNOWN_PRODUCER_ID, f"producer id {self.producer_id} was never issued")
            return
        if producer_epoch < cur.producer_epoch:
            raise ProducerStateError(
                E.INVALID_PRODUCER_EPOCH,
                f"producer {self.producer_id} epoch {producer_epoch} is older than {cur.producer_epoch}")
        if producer_epoch > cur.producer_epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {producer_epoch} of producer {self.producer_id} must start at sequence 0, "
                    f"got {first_seq}")
            self._check_txn(cur, transactional)
            return
        self._check_txn(cur, transactional)
        last = cur.last_seq
        if _in_sequence(last, first_seq):    # no batch cached (NO_SEQUENCE, -1): only sequence 0 follows
            return
        if first_seq <= last:
            code = self.manager.duplicate_beyond_cache_error
            raise ProducerStateError(
                code, f"producer {self.producer_id} sequence {first_seq} is at or below the last "
                      f"sequence {last} and older than the {cur.batch_metadata.maxlen} cached batches")
        raise ProducerStateError(
            E.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"out of order sequence for producer {self.producer_id}: {first_seq} (incoming), {last} (current end)")


    def _check_txn(self, cur: ProducerStateEntry, transactional: bool) -> None:
        if not transactional and cur.current_txn_first_offset is not None:
            raise ProducerStateError(
                E.INVALID_TXN_STATE, f"producer {self.producer_id} has an open transaction on this partition "
                                     f"(from offset {cur.current_txn_first_offset}): a non-transactional write")


class ProducerStateManager:
    """The producer states of one partition, rebuilt from the log and snapshotted beside it."""

    def __init__(self, directory: str, retain: int = NUM_BATCHES_TO_RETAIN,
                 duplicate_beyond_cache_error: int = E.DUPLICATE_SEQUENCE_NUMBER,
                 producer_id_known=None, txn_index_: "txn_index.TransactionIndex | None" = None,
                 unknown_producer: str = "accept", time: Time = SYSTEM):
        self.time = time
        self.dir = directory
        self.unknown_producer = unknown_producer
        self.verification_guards: dict[int, object] = {}   # KIP-890 part 1
        self.txn_index = txn_index_
        self.retain = retain
        self.duplicate_beyond_cache_error = duplicate_beyond_cache_error
        self._known = producer_id_known
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state covers the log below this offset
        self.batches_since_snapshot = 0

    def producer_id_known(self, pid: int) -> bool:
        return True if self._known is None else self._known(pid)

    def last_entry(self, pid: int) -> ProducerStateEntry | None:
        return self.producers.get(pid)

    def verification_guard(self, pid: int) -> object:
        """KIP-890 part 1: the guard for a verification about to be asked (kept while one is in place)."""
        return self.verification_guards.setdefault(pid, object())

    def verification_still_valid(self, pid: int, guard: object) -> bool:
        return self.verification_guards.get(pid) is guard

    def prepare_update(self, pid: int) -> ProducerAppendInfo:
        return ProducerAppendInfo(self, pid, self.producers.get(pid))

    def update(self, batch) -> "txn_index.CompletedTxn | None":
        """Fold an appended batch (leader, follower or recovery) into the state.

        Returns the transaction a control batch completed, else None."""
        completed = None
        pid = batch.producer_id
        if pid != rb.NO_PRODUCER_ID:
            if batch.is_control or batch.is_transactional:
                self.verification_guards.pop(pid, None)
            e = self.producers.get(pid)
            if e is None:
                e = ProducerStateEntry(pid, batch.producer_epoch, self.retain, time=self.time)
                self.producers[pid] = e
            if batch.is_control:
                # an empty control batch: the cleaner removed the whole transaction, marker and all
                # (Kafka's ProducerAppendInfo.append): nothing to complete
                completed = self._complete_txn(e, batch) if batch.record_count else None
            else:
                if batch.base_sequence == rb.NO_SEQUENCE:   # coordinator append (offsets): no sequence
                    if batch.producer_epoch > e.producer_epoch:
                        e.maybe_update_producer_epoch(batch.producer_epoch)
                else:
                    e.add_batch(batch.producer_epoch, batch.last_sequence, batch.last_offset,
                                batch.last_offset - batch.base_offset, batch.max_timestamp)
                if batch.is_transactional and e.current_txn_first_offset is None:
                    e.current_txn_first_offset = batch.base_offset
        self.map_end_offset = batch.last_offset + 1
        self.batches_since_snapshot += 1
        return completed

    def _complete_txn(self, e: ProducerStateEntry, batch) -> "txn_index.CompletedTxn":
        try:
            key, value = rb.records_of(batch)[0][:2]
            kind, coordinator_epoch = control_records.parse_control_record(key, value)
        except (IndexError, ValueError):
            kind, coordinator_epoch = control_records.ABORT, -1
        first = e.current_txn_first_offset
        done = txn_index.CompletedTxn(e.producer_id, -1 if first is None else first, batch.base_offset,
                                      kind == control_records.ABORT)
        if batch.producer_epoch > e.producer_epoch:
            e.maybe_update_producer_epoch(batch.producer_epoch)
        e.coordinator_epoch = max(e.coordinator_epoch, coordinator_epoch)
        e.current_txn_first_offset = None
        e.touch()                 # Kafka's appendEndTxnMarker: the marker sets lastTimestamp too
        if done.is_aborted and first is not None and self.txn_index is not None:
            self.txn_index.append(txn_index.AbortedTxn(e.producer_id, first, batch.base_offset,
                                                       self.first_unstable_offset(batch.base_offset)))
        return done

    def remove_expired_producers(self, expiration_ms: int) -> list[int]:
        """Forget producers that wrote nothing for `expiration_ms` or longer and have no open transaction
        (Kafka's producer.id.expiration.ms, KIP-854, and its isProducerExpired). Their next batch is a
        producer with no state here: a retry of an old batch is no longer recognised."""
        now_ms = self.time.nanoseconds() // 1_000_000
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset is None and now_ms - e.last_update_ms >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return gone

    def ongoing_txn_first_offsets(self) -> list[int]:
        return [e.current_txn_first_offset for e in self.producers.values()
                if e.current_txn_first_offset is not None]

    def first_unstable_offset(self, default: int) -> int:
        return min(self.ongoing_txn_first_offsets(), default=default)

    # -- snapshots -------------------------------------------------------------------------
    def _snapshot_files(self) -> list[tuple[int, str]]:
        out = []
        for n in os.listdir(self.dir):
            if n.endswith(".snapshot"):
                try:
                    out.append((int(n[:-9]), os.path.join(self.dir, n)))
                except ValueError:
                    pass
        return sorted(out)

    def snapshot(self) -> str:
        """Write the state at map_end_offset atomically; keep the two newest snapshots."""
        body = json.dumps({"version": 1, "offset": self.map_end_offset,
                           "producers": [e.to_json() for e in self.producers.values()]},
                          separators=(",", ":")).encode()
        path = os.path.join(self.dir, f"{self.map_end_offset:020d}.snapshot")
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"%08x\n" % zlib.crc32(body) + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for _, old in self._snapshot_files()[:-2]:
            os.remove(old)
        self.batches_since_snapshot = 0
        return path

    def _read_snapshot(self, path: str) -> dict | None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
            crc, body = raw[:8], raw[9:]
            if int(crc, 16) != zlib.crc32(body):
                return None
            return json.loads(body)
        except (OSError, ValueError):
            return None

    def load(self, log, max_snapshot_offset: int | None = None) -> list:
        """Rebuild from the newest valid snapshot at or below the log end (and at or below
        `max_snapshot_offset`: the checkpointed high watermark), then the log after it. Returns the
        transactions whose markers the replay met (txn_index.CompletedTxn), so the caller can keep
        those whose marker is not yet known to be replicated out of the last stable offset."""
        self.producers.clear()
        if self.txn_index is not None:
            self.txn_index.truncate_to(log.log_end_offset)
        start = log.log_start_offset
        for off, path in reversed(self._snapshot_files()):
            if off > log.log_end_offset:
                os.remove(path)  # the log was truncated below this snapshot
                continue
            if max_snapshot_offset is not None and off > max_snapshot_offset:
                continue         # newer than what is known replicated: replay from an older one
            data = self._read_snapshot(path)
            if data is None:
                log_msg = f"{path}: corrupt producer snapshot ignored"
                logging.getLogger(__name__).warning(log_msg)
                continue
            for p in data["producers"]:
                e = ProducerStateEntry(p["pid"], p["epoch"], self.retain, p["coordinator_epoch"],
                                       p["txn_first_offset"], time=self.time)
                for last_seq, last_off, delta, ts in p["batches"]:
                    e.batch_metadata.append(BatchMetadata(last_seq, last_off, delta, ts))
                self.producers[e.producer_id] = e
            start = off
            break
        self.map_end_offset = start
        completed = []
        for batch in log.batches(start):
            done = self.update(batch)
            if done is not None and done.first_offset >= 0:
                completed.append(done)
        self.batches_since_snapshot = 0
        return completed
