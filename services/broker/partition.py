"""Partition: one replica of a topic-partition on this broker: log, producer state, leader epochs, ISR.

Guarantees:
- appends are serialised per partition; a client batch is validated (format,
  then producer epoch and sequence) before it touches the log, so a rejected
  batch changes nothing; a retried batch that matches one of the producer's
  cached batches is not appended again and gets its original base offset;
- as leader, the high watermark is the smallest log end offset over the ISR
  and never moves back; consumers read only below it; an acks=all append is
  answered only once the high watermark has passed it (or with an error);
- as follower, batches are appended with the leader's offsets and epochs, and
  producer state and leader-epoch cache follow the log, also across
  truncation (KIP-101: truncation goes by leader epoch, never by high
  watermark alone);
- transactions: the last stable offset (LSO) is the smallest of the high
  watermark, the first offset of every open transaction, and the first
  offset of every completed transaction whose marker is not yet below the
  high watermark; read_committed reads stop at the LSO and carry the aborted
  transactions of the range. A marker from an older coordinator epoch than
  the producer's last one is refused (TRANSACTION_COORDINATOR_FENCED), one
  with an older producer epoch too (INVALID_PRODUCER_EPOCH); a marker at a
  newer epoch fences the producer's older epoch on this partition.
- the high watermark is checkpointed (about once a second, off the append
  path, and on close); the log flushes by its topic's flush.messages and
  flush.ms and is closed cleanly by `close` (docs/durability.md);
  after a restart it starts from the checkpoint, producer state is rebuilt
  from a snapshot at or below it, and every transaction whose marker the
  replay met at or above it stays out of the LSO until the high watermark
  passes the marker, so a restarted leader's LSO never passes an
  unreplicated marker.
- time: every rule here (ISR lag, the acks=all wait, marker timestamps)
  reads the `Time` the partition was given (`eoslab.common.time`), as
  Kafka's Partition reads its `time`; the producer state gets the same clock.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from eoslab.v1 import common_pb2
from eoslab.common import record_batch as rb
from eoslab.common.time import SYSTEM, Time
from services.broker.checkpoints import HW_CHECKPOINT, fsync_file, read_hw_checkpoint
from services.broker.isr_maintenance import HW_MOVED, LOG_MOVED, ROLE_MOVED, IsrMaintenance
from services.broker.partition_checkpoints import PartitionCheckpoints
from services.broker.leader_epoch_cache import LeaderEpochFileCache
from services.broker import log_validator
from services.broker.log_config import LogConfig
from services.broker.record_deletion import RecordDeletion
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.producer_state import ProducerStateError, ProducerStateManager
from services.broker.replica import Replica
from eoslab.common.control_records import control_record
from services.broker.txn_index import AbortedTxn, TransactionIndex
from eoslab.common.errors import E

log = logging.getLogger(__name__)
# what moved (isr_maintenance), for `Partition.on_change`: a follower's fetch waits for the log end, a
# consumer's for the high watermark (and so the LSO), both for a change of role


@dataclass(slots=True)
class AppendResult:
    error: int
    base_offset: int = -1
    last_offset: int = -1
    message: str = ""
    duplicate: bool = False
    record_errors: tuple = ()      # (batch index, why): the records that made the batch INVALID_RECORD
    log_append_time: int = -1      # the leader's stamp under LogAppendTime


class Partition(IsrMaintenance, PartitionCheckpoints, RecordDeletion):
    def __init__(self, topic: str, partition: int, data_dir: str, broker_id: int, config: LogConfig,
                 producer_id_known=None, time: Time = SYSTEM):
        self.time = time
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.config = config
        self.dir = os.path.join(data_dir, f"{topic}-{partition}")
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)   # log end, high watermark or role moved
        self.log = UnifiedLog(self.dir, config.segment_bytes, flush_messages=config.flush_messages,
                              flush_ms=config.flush_ms, time=time, segment_ms=config.segment_ms)
        self.epochs = LeaderEpochFileCache(self.dir)
        self.epochs.truncate_from_end(self.log.log_end_offset + 1)
        self.txn_index = TransactionIndex(self.dir)
        self.log.flush_also = lambda: fsync_file(self.txn_index.path)   # as Kafka's segment flush does
        self.producer_state = ProducerStateManager(
            self.dir, config.producer_state_batches, config.duplicate_beyond_cache_error, producer_id_known,
            self.txn_index, config.unknown_producer, time=time)
        self.hw_checkpoint_path = os.path.join(self.dir, HW_CHECKPOINT)
        hw = min(read_hw_checkpoint(self.hw_checkpoint_path), self.log.log_end_offset)
        replayed = self.producer_state.load(self.log, max_snapshot_offset=hw)
        # (txn first offset, marker offset) not yet stable; after a restart, every transaction whose
        # marker lies at or above the checkpointed high watermark, as Kafka's unreplicated transactions
        self.unstable_completed: list[tuple[int, int]] = [(c.first_offset, c.last_offset) for c in replayed
                                                          if c.last_offset >= hw]
        self._hw_checkpointed = hw
        self.verify_txn = None   # KIP-890 part 1: set by the ReplicaManager
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1   # zk version of the partition state
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.followers: dict[int, Replica] = {}
        self.high_watermark = hw
        self.isr_change_in_flight = False
        self.leader_epoch_start = 0
        self.on_change = None   # (partition, what) -> None, set by the ReplicaManager: wakes long polls
                                # (what: LOG_MOVED, HW_MOVED or ROLE_MOVED)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # -- role changes ----------------------------------------------------------------------------
    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int], partition_epoch: int) -> None:
        with self.lock:
            now = self.time.monotonic()
            was_leader = self.is_leader
            self.leader_id = self.broker_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = list(replicas)
            self.isr = list(isr)
            old, leo = self.followers if was_leader else {}, self.log.log_end_offset
            self.followers = {r: old[r].reset_for_reelection(now, r in isr, leo) if r in old
                              else Replica.for_new_leader(now, r in isr)
                              for r in replicas if r != self.broker_id}
            self.epochs.assign(leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start = self.log.log_end_offset
            self.high_watermark = min(max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset)
            self._maybe_increment_hw()
            self.changed.notify_all()
            self._notify(ROLE_MOVED)

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int], isr: list[int],
                      partition_epoch: int) -> None:
        with self.lock:
            self.leader_id = leader_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = list(replicas)
            self.isr = list(isr)
            self.followers = {}
            self.changed.notify_all()
            self._notify(ROLE_MOVED)

    def update_config(self, config: LogConfig) -> None:
        """New topic settings for this partition (after AlterConfigs): the next append and flush read them."""
        with self.lock:
            self.config = config
            self.log.segment_bytes = config.segment_bytes
            self.log.segment_ms = config.segment_ms
            self.log.flush_messages = config.flush_messages
            self.log.flush_ms = config.flush_ms

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return E.NONE
        return E.FENCED_LEADER_EPOCH if current_leader_epoch < self.leader_epoch else E.UNKNOWN_LEADER_EPOCH

    # -- leader appends ------------------------------------------------------------------------------
    def append_records_to_leader(self, batch: common_pb2.RecordBatch, acks: int = -1,
                                 transactional_id: str = "", add_to_txn: bool = False) -> AppendResult:
        """`add_to_txn` (KIP-890 part 2, Produce v12): a batch that starts the producer's transaction on
        this partition has the coordinator add the partition, whether or not verification is enabled."""
        batch, bad = log_validator.validate(batch, self.config)
        if bad is not None:
            return AppendResult(bad.code, message=bad.message, record_errors=bad.record_errors)
        pid = batch.producer_id
        transactional = bool(batch.attributes & rb.TRANSACTIONAL_FLAG)
        guard = None
        if transactional and (add_to_txn or self.config.transaction_verification) and self.verify_txn is not None:
            with self.lock:
                entry = self.producer_state.last_entry(pid)
                needed = entry is None or entry.current_txn_first_offset is None or \
                    entry.producer_epoch != batch.producer_epoch
                if needed:
                    guard = self.producer_state.verification_guard(pid)
            if guard is not None:
                err = self.verify_txn(transactional_id, pid, batch.producer_epoch, self.topic, self.partition,
                                      add=add_to_txn)
                if err != E.NONE:
                    what = "could not add this partition to" if add_to_txn else \
                        "does not know this partition in"
                    return AppendResult(err, message=f"the transaction coordinator {what} the producer's "
                                                     "ongoing transaction (KIP-890)")
        with self.lock:
            if guard is not None and not self.producer_state.verification_still_valid(pid, guard):
                entry = self.producer_state.last_entry(pid)
                if entry is None or entry.current_txn_first_offset is None:
                    return AppendResult(E.INVALID_TXN_STATE, message="the transaction ended between its "
                                        "verification and this append (KIP-890 verification guard)")
            if not self.is_leader:
                return AppendResult(E.NOT_LEADER_OR_FOLLOWER, message=f"broker {self.broker_id} is not the leader")
            if acks == -1 and len(self.isr) < self.config.min_insync_replicas:
                return AppendResult(E.NOT_ENOUGH_REPLICAS, message=f"ISR {self.isr} is smaller than "
                                    f"min.insync.replicas {self.config.min_insync_replicas}")
            if pid != rb.NO_PRODUCER_ID:
                psm = self.producer_state
                entry = psm.last_entry(pid)
                last_seq = rb.last_sequence(batch.base_sequence, batch.record_count)
                if entry is not None:
                    dup = entry.find_duplicate_batch(batch.producer_epoch, batch.base_sequence, last_seq)
                    if dup is not None:
                        return AppendResult(E.NONE, dup.first_offset, dup.last_offset, duplicate=True)
                try:
                    psm.prepare_update(pid).check(batch.producer_epoch, batch.base_sequence, batch.record_count,
                                                  transactional)
                except ProducerStateError as e:
                    return AppendResult(e.code, message=str(e))
            crc, attributes, max_timestamp, append_time = batch.crc, batch.attributes, batch.max_timestamp, -1
            if self.config.log_append_time:     # Kafka's LogValidator: the batch takes the leader's time
                append_time = max_timestamp = self.time.milliseconds()
                attributes |= rb.TIMESTAMP_TYPE_FLAG
                crc = rb.batch_crc(attributes, pid, batch.producer_epoch, batch.base_sequence, batch.record_count,
                                   max_timestamp, batch.records)
            stored = StoredBatch(self.log.log_end_offset, self.leader_epoch, crc, attributes, pid,
                                 batch.producer_epoch, batch.base_sequence, batch.record_count,
                                 max_timestamp, batch.records)
            self._append(stored)
            self._maybe_increment_hw()
            return AppendResult(E.NONE, stored.base_offset, stored.last_offset, log_append_time=append_time)

    def append_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          committed: bool) -> AppendResult:
        """Append a COMMIT or ABORT control batch for the producer (from the transaction coordinator)."""
        with self.lock:
            if not self.is_leader:
                return AppendResult(E.NOT_LEADER_OR_FOLLOWER, message=f"broker {self.broker_id} is not the leader")
            if len(self.isr) < self.config.min_insync_replicas:
                return AppendResult(E.NOT_ENOUGH_REPLICAS, message=f"ISR {self.isr} is smaller than "
                                    f"min.insync.replicas {self.config.min_insync_replicas}")
            entry = self.producer_state.last_entry(producer_id)
            if entry is not None and coordinator_epoch < entry.coordinator_epoch:
                return AppendResult(E.TRANSACTION_COORDINATOR_FENCED,
                                    message=f"coordinator epoch {coordinator_epoch} is older than "
                                            f"{entry.coordinator_epoch}")
            if entry is not None and producer_epoch < entry.producer_epoch:
                return AppendResult(E.INVALID_PRODUCER_EPOCH,
                                    message=f"marker epoch {producer_epoch} is older than {entry.producer_epoch}")
            key, value = control_record(committed, coordinator_epoch)
            now = self.time.milliseconds()
            data = rb.encode_records([(key, value, now)])
            attrs = rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG
            crc = rb.batch_crc(attrs, producer_id, producer_epoch, rb.NO_SEQUENCE, 1, now, data)
            stored = StoredBatch(self.log.log_end_offset, self.leader_epoch, crc, attrs, producer_id,
                                 producer_epoch, rb.NO_SEQUENCE, 1, now, data)
            self._append(stored)
            self._maybe_increment_hw()
            return AppendResult(E.NONE, stored.base_offset, stored.last_offset)

    def append_internal(self, records: list[tuple[bytes | None, bytes | None, int]], producer_id: int = -1,
                        producer_epoch: int = -1, transactional: bool = False) -> AppendResult:
        """A coordinator's own append (offset commits): no sequence, but the producer epoch is checked."""
        with self.lock:
            if not self.is_leader:
                return AppendResult(E.NOT_LEADER_OR_FOLLOWER, message=f"broker {self.broker_id} is not the leader")
            if len(self.isr) < self.config.min_insync_replicas:
                return AppendResult(E.NOT_ENOUGH_REPLICAS, message=f"ISR {self.isr} too small")
            if producer_id >= 0:
                entry = self.producer_state.last_entry(producer_id)
                if entry is not None and producer_epoch < entry.producer_epoch:
                    return AppendResult(E.INVALID_PRODUCER_EPOCH,
                                        message=f"epoch {producer_epoch} is older than {entry.producer_epoch}")
            data = rb.encode_records(records)
            ts = max((r[2] for r in records), default=-1)
            attrs = rb.TRANSACTIONAL_FLAG if transactional else 0
            crc = rb.batch_crc(attrs, producer_id, producer_epoch, rb.NO_SEQUENCE, len(records), ts, data)
            stored = StoredBatch(self.log.log_end_offset, self.leader_epoch, crc, attrs, producer_id,
                                 producer_epoch, rb.NO_SEQUENCE, len(records), ts, data)
            self._append(stored)
            self._maybe_increment_hw()
            return AppendResult(E.NONE, stored.base_offset, stored.last_offset)

    @property
    def last_stable_offset(self) -> int:
        with self.lock:
            hw = self.high_watermark
            self.unstable_completed = [(f, m) for f, m in self.unstable_completed if m >= hw]
            firsts = self.producer_state.ongoing_txn_first_offsets() + [f for f, _ in self.unstable_completed]
            return max(min(firsts + [hw]), self.log.log_start_offset)   # Kafka: never below the log start

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        with self.lock:
            return self.txn_index.collect(start, end)

    def _append(self, stored: StoredBatch) -> None:
        self.epochs.assign(stored.leader_epoch, stored.base_offset)
        self.log.append(stored)
        done = self.producer_state.update(stored)
        if done is not None and done.first_offset >= 0:
            self.unstable_completed.append((done.first_offset, done.last_offset))
            if len(self.unstable_completed) > 64:   # followers never ask for the LSO: keep the list short
                self.unstable_completed = [(f, m) for f, m in self.unstable_completed if m >= self.high_watermark]
        if self.producer_state.batches_since_snapshot >= self.config.snapshot_interval_batches:
            self.producer_state.snapshot()
        self._notify(LOG_MOVED)     # (acks=all waiters wait for the high watermark: not woken here)

    def _notify(self, what: int) -> None:
        if self.on_change is not None:
            self.on_change(self, what)

    # -- follower side ----------------------------------------------------------------------------------
    def append_as_follower(self, batches, leader_hw: int) -> None:
        with self.lock:
            for pb in batches:
                b = StoredBatch.from_proto(pb)
                if b.last_offset < self.log.log_end_offset:
                    continue  # already have it
                # offsets may leave a gap where the leader's cleaner removed records (Kafka refuses only
                # a batch starting below the log end, UnifiedLog.append)
                if b.base_offset < self.log.log_end_offset or not b.valid_crc():
                    raise IOError(f"{self.topic}-{self.partition}: replicated batch at {b.base_offset} does not "
                                  f"fit the log end {self.log.log_end_offset}")
                self._append(b)
            hw = max(self.high_watermark, min(leader_hw, self.log.log_end_offset))
            if hw != self.high_watermark:       # KIP-392: consumers may fetch from this follower
                self.high_watermark = hw
                self._notify(HW_MOVED)

    def truncate_to(self, offset: int) -> None:
        with self.lock:
            if offset >= self.log.log_end_offset:
                # nothing to cut from the log, but an epoch this replica started at its end and never
                # wrote (it led, appended nothing, lost the leadership) goes, as Kafka's Log.truncateTo
                # always truncates the epoch cache: kept, it names an epoch the leader never had, and the
                # follower would ask OffsetsForLeaderEpoch for it again and again and never fetch
                self.epochs.truncate_from_end(self.log.log_end_offset)
                return
            log.info("%s-%d: truncating from %d to %d", self.topic, self.partition, self.log.log_end_offset, offset)
            self.log.truncate_to(offset)
            self.epochs.truncate_from_end(self.log.log_end_offset)
            self.producer_state.load(self.log)
            self.unstable_completed = [(f, m) for f, m in self.unstable_completed if m < offset]
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            self.changed.notify_all()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self.lock:
            return self.epochs.end_offset_for(epoch, self.log.log_end_offset)

    # -- reads ----------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, replica: bool = False,
             read_committed: bool = False, min_one: bool = True) -> tuple[int, list[StoredBatch]]:
        with self.lock:
            leo = self.log.log_end_offset
            if offset < self.log.log_start_offset or offset > leo:
                return E.OFFSET_OUT_OF_RANGE, []
            limit = leo if replica else (self.last_stable_offset if read_committed else self.high_watermark)
            if offset >= limit:
                return E.NONE, []
        return E.NONE, self.log.read(offset, max_bytes, limit, min_one=min_one)

    def remove_expired_producers(self) -> list[int]:
        with self.lock:
            gone = self.producer_state.remove_expired_producers(self.config.producer_id_expiration_ms)
        if gone:
            log.info("%s-%d: producer state of %s expired (producer.id.expiration.ms %d)", self.topic,
                     self.partition, gone, self.config.producer_id_expiration_ms)
        return gone

    def close(self, snapshot: bool = True) -> None:
        """A clean close: the log is flushed whole and marked clean (docs/durability.md)."""
        with self.lock:
            self.checkpoint_hw()
            if snapshot:
                try:
                    self.producer_state.snapshot()
                except OSError as e:
                    log.warning("%s-%d: snapshot on close failed: %s", self.topic, self.partition, e)
            self.log.close(clean=True)
            self.txn_index.close()
