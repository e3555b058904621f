"""KafkaProducer: the producer's user-facing API.

Guarantees: `send` returns a future that resolves exactly once, to a
RecordMetadata (offset -1 when the broker acknowledged a duplicate it no
longer has the offset for, or with acks=0) or to a KafkaError; `flush` returns
once every record sent before it is resolved; `close` leaves no thread behind.

With transactional_id (KIP-98): `init_transactions` gets (producer id, epoch)
from the transaction coordinator, fencing every earlier producer with the same
id and aborting its open transaction; records sent between
`begin_transaction` and `commit_transaction` become visible to read_committed
consumers together or not at all; `commit_transaction` raises (and nothing
is committed) when any send of the transaction failed, and the transaction
must then be aborted; a fenced producer (PRODUCER_FENCED, and the errors the
release treats as fatal) raises on every later call. On releases with KIP-360
(2.5+) the abort after a failed send bumps the epoch with InitProducerId(pid,
epoch) and resets the sequences, so the same instance begins the next
transaction; on 0.11 such errors are fatal. Every state change goes through
the TransactionManager's state machine.

The producer behaves as the Kafka release in its config's `kafka.version`
(ProducerConfig): defaults, idempotence resolution, reactions to errors.

Time is injected as in Kafka (`time: Time = SYSTEM`, eoslab.common.time):
the producer hands its clock to ClusterMetadata, RecordAccumulator, Sender and
the coordinator calls, and its own deadlines (InitProducerId, topic metadata,
flush) and record timestamps (wall clock) read it too.
"""
from __future__ import annotations

import itertools
import zlib

import grpc

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from clients.producer.config import ProducerConfig
from clients.producer.futures import FutureRecordMetadata, RecordMetadata  # noqa: F401 - RecordMetadata: API
from clients.producer.record_accumulator import RecordAccumulator
from clients.producer.sender import Sender
from clients.producer import transaction_manager as txm
from clients.producer.transaction_manager import TransactionManager
from clients.producer.transactions import ABORTABLE_IF_POSSIBLE, ConsumerGroupMetadata, TransactionRequests
from eoslab.v1 import broker_pb2

INIT_PRODUCER_ID_TIMEOUT_S = 10.0   # one InitProducerId call to a broker (an idempotent producer's id)
RETRY_BACKOFF_S = 0.1               # between rounds over the brokers (Kafka's retry.backoff.ms default, 100 ms)


class KafkaProducer:
    def __init__(self, bootstrap: str, config: ProducerConfig | None = None, *, time: Time = SYSTEM, **props):
        self.time = time
        self.config = config or (ProducerConfig.from_props(props) if props else ProducerConfig())
        self.metadata = ClusterMetadata(bootstrap, time=time)
        self.accumulator = RecordAccumulator(self.config.batch_size, self.config.linger_ms,
                                             self.config.buffer_memory, self.config.delivery_timeout_ms, time)
        self.transaction_manager = TransactionManager(self.config.enable_idempotence, self.config.transactional_id,
                                                      self.config.version, self.config.on_out_of_order)
        self.txn = (TransactionRequests(self, max(self.config.request_timeout_ms / 1000.0, 30.0))
                    if self.config.transactional_id else None)
        self.sender = Sender(self.config, self.metadata, self.accumulator, self.transaction_manager,
                             self._init_producer_id, self.txn.add_partitions if self.txn else None, time)
        self._rr = itertools.count()
        self._closed = False
        self.sender.start()

    # -- producer id ------------------------------------------------------------------------
    def _init_producer_id(self) -> tuple[int, int]:
        deadline = self.time.monotonic() + self.config.request_timeout_ms / 1000.0
        last = None
        while self.time.monotonic() < deadline and not self.sender.force_close:
            for addr in self.metadata.addresses():
                try:
                    r = self.metadata.stub(addr).InitProducerId(
                        broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=INIT_PRODUCER_ID_TIMEOUT_S)
                except grpc.RpcError as e:
                    last = KafkaError(E.NETWORK_EXCEPTION, f"{addr}: {e.code().name}")
                    continue
                if r.error == E.NONE:
                    return r.producer_id, r.producer_epoch
                last = KafkaError(r.error, f"InitProducerId at {addr}")
            self.time.sleep(RETRY_BACKOFF_S)
        raise last or KafkaError(E.REQUEST_TIMED_OUT, "InitProducerId")

    # -- transactions ---------------------------------------------------------------------------
    def _transactional(self) -> TransactionManager:
        if self.txn is None:
            raise KafkaError(E.INVALID_TXN_STATE, "not a transactional producer (no transactional.id)")
        return self.transaction_manager

    def init_transactions(self, timeout: float = 60.0) -> None:
        tm = self._transactional()
        tm.begin_init()
        pid, epoch = self.txn.init_producer_id(timeout)
        tm.complete_init(pid, epoch)

    def begin_transaction(self) -> None:
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[tuple[str, int], int],
                                    group_metadata: "ConsumerGroupMetadata | str") -> None:
        """Commit the consumer's offsets (the next offset to read, per partition) with the transaction."""
        tm = self._transactional()
        tm.ensure_in_transaction("send_offsets_to_transaction")
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        try:
            if not tm.offsets_added:
                self.txn.add_offsets(group_metadata.group_id)
                tm.offsets_added_to_transaction()
            self.txn.txn_offset_commit(offsets, group_metadata)
        except KafkaError as e:
            if tm.fatal_error is None and not e.retriable:
                tm.transition_to_abortable(e)
            raise

    def commit_transaction(self, timeout: float | None = None) -> None:
        tm = self._transactional()
        tm.maybe_fail_with_error()
        if tm.state is not txm.COMMITTING:
            tm.ensure_in_transaction("commit_transaction")
            flushed = self.flush(timeout)
            tm.maybe_fail_with_error()       # a send of the transaction failed: it must be aborted
            if not flushed:
                raise KafkaError(E.REQUEST_TIMED_OUT, "commit_transaction: sends still unacknowledged "
                                                      f"after {timeout} s (the transaction is still open)")
        tm.begin_commit()
        r = self._end_txn(True)
        tm.complete_transaction(r.producer_id, r.producer_epoch) if r is not None else tm.complete_transaction()

    def abort_transaction(self, timeout: float | None = None) -> None:
        tm = self._transactional()
        if tm.state is txm.INITIALIZING and tm.epoch_bump_required:
            self._bump_epoch()                 # the abort went through; its epoch bump did not yet
            return
        tm.begin_abort()
        err = KafkaError(E.TRANSACTION_ABORTABLE, "the transaction was aborted")
        with self.accumulator.lock:   # records not yet sent are dropped, as Kafka's abortUndrainedBatches
            dropped = [b for tp, dq in self.accumulator.batches.items() for b in dq if b.base_sequence is None]
            for b in dropped:
                self.accumulator.batches[b.tp].remove(b)
        for b in dropped:
            self.sender._fail(b, err)
        flushed = self.flush(timeout)
        if tm.fatal_error is not None:
            raise tm.fatal_error
        if not flushed:
            raise KafkaError(E.REQUEST_TIMED_OUT, f"abort_transaction: sends still in flight after {timeout} s")
        last = tm.abort_cause
        r = None
        # the coordinator takes no EndTxn for an id it no longer maps: go straight to the bump (as Kafka)
        if not (isinstance(last, KafkaError) and last.code == E.INVALID_PRODUCER_ID_MAPPING and tm.epoch_bump_required):
            try:
                r = self._end_txn(False)
            except KafkaError as e:
                if not (e.code in ABORTABLE_IF_POSSIBLE and tm.epoch_bump_required and tm.fatal_error is None):
                    raise
                r = None                       # EndTxn(abort) refused for the id: the bump below replaces it
        bump = tm.complete_transaction(r.producer_id, r.producer_epoch) if r is not None \
            else tm.complete_transaction()
        if bump:
            self._bump_epoch()

    def _bump_epoch(self) -> None:
        """KIP-360: InitProducerId(pid, epoch) gives this producer a new epoch; sequences start at 0."""
        tm = self.transaction_manager
        pid, epoch = self.txn.init_producer_id(producer_id=tm.producer_id, producer_epoch=tm.producer_epoch)
        tm.complete_epoch_bump(pid, epoch)

    def _end_txn(self, committed: bool):
        tm = self.transaction_manager
        with tm.coordinator_lock:               # after any AddPartitionsToTxn in flight, never beside it
            if tm.txn_partitions or tm.offsets_added:
                return self.txn.end_txn(committed)
        return None

    @property
    def producer_id(self) -> int:
        return self.transaction_manager.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.transaction_manager.producer_epoch

    # -- sending ----------------------------------------------------------------------------
    def partitions_for(self, topic: str, timeout: float = 10.0) -> int:
        n = self.metadata.partitions_for(topic)
        deadline = self.time.monotonic() + timeout
        while n is None:
            try:
                self.metadata.refresh([topic])
            except KafkaError:
                if self.time.monotonic() > deadline:
                    raise
            n = self.metadata.partitions_for(topic)
            if n is not None:
                break
            if self.time.monotonic() > deadline:
                err = self.metadata.topic_errors.get(topic, E.UNKNOWN_TOPIC_OR_PARTITION)
                raise KafkaError(err, f"topic {topic!r} not found")
            self.time.sleep(RETRY_BACKOFF_S)
        return n

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None, timestamp_ms: int | None = None, callback=None) -> FutureRecordMetadata:
        """Append a record; its future resolves when the broker answers. `callback(metadata, exception)`,
        as Kafka's send(record, callback), runs on the producer's I/O thread once the record is acknowledged
        (RecordMetadata, None) or failed (None, the error); it costs less than add_done_callback on the
        future (no lock of its own, no future passed)."""
        if self._closed:
            raise KafkaError(E.INVALID_REQUEST, "producer is closed")
        tm = self.transaction_manager
        if tm.fatal_error is not None:
            raise tm.fatal_error
        if tm.transactional:
            tm.ensure_in_transaction()
        n = self.partitions_for(topic)
        if partition is None:
            partition = (zlib.crc32(key) if key is not None else next(self._rr)) % n
        elif not 0 <= partition < n:
            raise KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        ts = timestamp_ms if timestamp_ms is not None else self.time.milliseconds()
        if tm.transactional:
            tm.maybe_add_partition((topic, partition))
        return self.accumulator.append(topic, partition, key, value, ts, self.sender.wake, callback)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record sent before is resolved; False if `timeout` passed first."""
        self.accumulator.begin_flush()
        self.sender.wake()
        try:
            deadline = None if timeout is None else self.time.monotonic() + timeout
            # every batch not yet resolved, wherever the sender has it: one it has drained but not yet
            # put in flight, or taken out of flight to retry, is in neither of those two lists
            for b in self.accumulator.incomplete_batches():
                left = None if deadline is None else max(0.0, deadline - self.time.monotonic())
                if not b.result.wait(left):
                    return False
            return True
        finally:
            self.accumulator.end_flush()

    def metrics(self) -> dict:
        m = dict(self.sender.stats)
        m.update(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                 epoch_bumps=self.transaction_manager.epoch_bumps)
        return m

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        self._closed = True
        with self.accumulator.lock:
            self.accumulator.closed = True
        self.sender.running = False
        self.sender.wake()
        self.sender.join(timeout)
        if self.sender.is_alive():
            self.sender.force_close = True
            self.sender.wake()
            self.sender.join(5)
        self.metadata.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
