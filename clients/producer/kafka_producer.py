"""KafkaProducer: the producer's user-facing API.

Guarantees: `send` returns a future that resolves exactly once, to a
RecordMetadata (offset -1 when the broker acknowledged a duplicate it no
longer has the offset for, or with acks=0) or to a KafkaError; `flush` returns
once every record sent before it is resolved; `close` leaves no thread behind.
"""
from __future__ import annotations

import itertools
import time
import zlib
from dataclasses import dataclass

import grpc

from clients.errors import E, KafkaError
from clients.metadata import ClusterMetadata
from clients.producer.config import ProducerConfig
from clients.producer.futures import FutureRecordMetadata
from clients.producer.record_accumulator import RecordAccumulator
from clients.producer.sender import Sender
from clients.producer.transaction_manager import TransactionManager
from eoslab.v1 import broker_pb2


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    base_sequence: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1


class KafkaProducer:
    def __init__(self, bootstrap: str, config: ProducerConfig | None = None, **props):
        self.config = config or (ProducerConfig.from_props(props) if props else ProducerConfig())
        self.metadata = ClusterMetadata(bootstrap)
        self.accumulator = RecordAccumulator(self.config.batch_size, self.config.linger_ms,
                                             self.config.buffer_memory)
        self.transaction_manager = TransactionManager(self.config.enable_idempotence)
        self.sender = Sender(self.config, self.metadata, self.accumulator, self.transaction_manager,
                             self._init_producer_id)
        self._rr = itertools.count()
        self._closed = False
        self.sender.start()

    # -- producer id ------------------------------------------------------------------------
    def _init_producer_id(self) -> tuple[int, int]:
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000.0
        last = None
        while time.monotonic() < deadline and not self.sender.force_close:
            for addr in self.metadata.addresses():
                try:
                    r = self.metadata.stub(addr).InitProducerId(
                        broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=10)
                except grpc.RpcError as e:
                    last = KafkaError(E.NETWORK_EXCEPTION, f"{addr}: {e.code().name}")
                    continue
                if r.error == E.NONE:
                    return r.producer_id, r.producer_epoch
                last = KafkaError(r.error, f"InitProducerId at {addr}")
            time.sleep(0.1)
        raise last or KafkaError(E.REQUEST_TIMED_OUT, "InitProducerId")

    @property
    def producer_id(self) -> int:
        return self.transaction_manager.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.transaction_manager.producer_epoch

    # -- sending ----------------------------------------------------------------------------
    def partitions_for(self, topic: str, timeout: float = 10.0) -> int:
        n = self.metadata.partitions_for(topic)
        deadline = time.monotonic() + timeout
        while n is None:
            try:
                self.metadata.refresh([topic])
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
            n = self.metadata.partitions_for(topic)
            if n is not None:
                break
            if time.monotonic() > deadline:
                err = self.metadata.topic_errors.get(topic, E.UNKNOWN_TOPIC_OR_PARTITION)
                raise KafkaError(err, f"topic {topic!r} not found")
            time.sleep(0.1)
        return n

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None, timestamp_ms: int | None = None) -> FutureRecordMetadata:
        if self._closed:
            raise KafkaError(E.INVALID_REQUEST, "producer is closed")
        if self.transaction_manager.fatal_error is not None:
            raise self.transaction_manager.fatal_error
        n = self.partitions_for(topic)
        if partition is None:
            partition = (zlib.crc32(key) if key is not None else next(self._rr)) % n
        elif not 0 <= partition < n:
            raise KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        return self.accumulator.append(topic, partition, key, value, ts, self.sender.wake)

    def flush(self, timeout: float | None = None) -> None:
        self.accumulator.begin_flush()
        self.sender.wake()
        try:
            while True:
                try:
                    in_flight = list(self.sender.in_flight_batches)
                    break
                except RuntimeError:  # the sender changed the set while we copied it
                    continue
            deadline = None if timeout is None else time.monotonic() + timeout
            for b in self.accumulator.all_batches() + in_flight:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not b.result.wait(left):
                    return
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
