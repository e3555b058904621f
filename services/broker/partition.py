"""Partition: one replica of a topic-partition on this broker, its log and producer state.

Guarantees: appends are serialised per partition; a client batch is validated
(format, then producer epoch and sequence) before it touches the log, so a
rejected batch changes nothing; a retried batch that matches one of the
producer's cached batches is not appended again and gets its original base
offset; consumers read only below the high watermark.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

from eoslab.v1 import common_pb2
from services.broker import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.producer_state import ProducerStateError, ProducerStateManager

E = common_pb2.ErrorCode
log = logging.getLogger(__name__)


@dataclass
class LogConfig:
    max_message_bytes: int = 1048588           # Kafka's default max.message.bytes
    segment_bytes: int = 16 * 1024 * 1024
    producer_state_batches: int = 5            # batches remembered per producer
    duplicate_beyond_cache_error: int = E.DUPLICATE_SEQUENCE_NUMBER
    snapshot_interval_batches: int = 1000
    min_insync_replicas: int = 1
    extra: dict = field(default_factory=dict)


@dataclass(slots=True)
class AppendResult:
    error: int
    base_offset: int = -1
    message: str = ""
    duplicate: bool = False


class Partition:
    def __init__(self, topic: str, partition: int, data_dir: str, broker_id: int, config: LogConfig,
                 producer_id_known=None):
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.config = config
        self.dir = os.path.join(data_dir, f"{topic}-{partition}")
        self.lock = threading.RLock()
        self.log = UnifiedLog(self.dir, config.segment_bytes)
        self.producer_state = ProducerStateManager(
            self.dir, config.producer_state_batches, config.duplicate_beyond_cache_error, producer_id_known)
        self.producer_state.load(self.log)
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.high_watermark = self.log.log_end_offset
        self.data_arrived = threading.Condition(self.lock)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        with self.lock:
            self.leader_id = self.broker_id
            self.leader_epoch = leader_epoch
            self.replicas = list(replicas)
            self.isr = list(isr)
            self.high_watermark = self.log.log_end_offset  # single-replica ISR: all of the log

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        with self.lock:
            self.leader_id = leader_id
            self.leader_epoch = leader_epoch
            self.replicas = list(replicas)
            self.isr = list(isr)

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return E.NONE
        return E.FENCED_LEADER_EPOCH if current_leader_epoch < self.leader_epoch else E.UNKNOWN_LEADER_EPOCH

    def append_records_to_leader(self, batch: common_pb2.RecordBatch) -> AppendResult:
        bad = rb.validate_batch(batch, self.config.max_message_bytes)
        if bad is not None:
            return AppendResult(bad.code, message=bad.message)
        pid = batch.producer_id
        with self.lock:
            if not self.is_leader:
                return AppendResult(E.NOT_LEADER_OR_FOLLOWER, message=f"broker {self.broker_id} is not the leader")
            if pid != rb.NO_PRODUCER_ID:
                psm = self.producer_state
                entry = psm.last_entry(pid)
                last_seq = rb.last_sequence(batch.base_sequence, batch.record_count)
                if entry is not None:
                    dup = entry.find_duplicate_batch(batch.producer_epoch, batch.base_sequence, last_seq)
                    if dup is not None:
                        return AppendResult(E.NONE, dup.first_offset, duplicate=True)
                try:
                    psm.prepare_update(pid).check(batch.producer_epoch, batch.base_sequence, batch.record_count)
                except ProducerStateError as e:
                    return AppendResult(e.code, message=str(e))
            stored = StoredBatch(self.log.log_end_offset, self.leader_epoch, batch.crc, batch.attributes, pid,
                                 batch.producer_epoch, batch.base_sequence, batch.record_count,
                                 batch.max_timestamp, batch.records)
            self.log.append(stored)
            self.producer_state.update(stored)
            if len(self.isr) <= 1:
                self.high_watermark = self.log.log_end_offset
            if self.producer_state.batches_since_snapshot >= self.config.snapshot_interval_batches:
                self.producer_state.snapshot()
            self.data_arrived.notify_all()
            return AppendResult(E.NONE, stored.base_offset)

    def read(self, offset: int, max_bytes: int, isolation_committed: bool = False,
             replica: bool = False) -> tuple[int, list[StoredBatch]]:
        with self.lock:
            leo = self.log.log_end_offset
            if offset < self.log.log_start_offset or offset > leo:
                return E.OFFSET_OUT_OF_RANGE, []
            limit = leo if replica else self.high_watermark
            if offset >= limit:
                return E.NONE, []
        return E.NONE, self.log.read(offset, max_bytes, limit)

    def wait_for_data(self, offset: int, timeout: float) -> None:
        with self.lock:
            if self.high_watermark <= offset:
                self.data_arrived.wait(timeout)

    def close(self, snapshot: bool = True) -> None:
        with self.lock:
            if snapshot:
                try:
                    self.producer_state.snapshot()
                except OSError as e:
                    log.warning("%s-%d: snapshot on close failed: %s", self.topic, self.partition, e)
            self.log.close()
