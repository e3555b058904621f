"""RecordAccumulator and ProducerBatch: records gathered into batches per partition.

Guarantees: records of one partition leave in the order they were appended;
a retried batch is put back in sequence order (Kafka's insertInSequenceOrder),
ahead of batches that have no sequence yet; `append` blocks while more than
buffer.memory bytes wait, so memory stays bounded; a batch is in `incomplete`
from its creation until it is completed or failed (`release`), wherever it is
meanwhile (waiting, drained into a request, in flight, put back for a retry),
so a flush that waits on `incomplete_batches()` misses none (Kafka's
IncompleteBatches and awaitFlushCompletion).

Time rules, read on the `Time` given (monotonic seconds), as Kafka's:
- linger.ms: an open batch that is not full is not ready until linger.ms
  after its creation, unless a flush or close is on (`lingering`, `ready`);
- retry.backoff.ms: a retried batch is not ready before its `retry_at`;
- delivery.timeout.ms: a batch is expired once that long has passed since
  its creation (ProducerBatch.hasReachedDeliveryTimeout: `>=`), and
  `expired_batches` takes every such waiting batch out of its partition.
"""
from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

from clients.producer.futures import FutureRecordMetadata, ProduceRequestResult
from eoslab.common import record_batch as rb
from eoslab.common.time import SYSTEM, Time

RECORD_OVERHEAD = 16


@dataclass(eq=False)
class ProducerBatch:
    topic: str
    partition: int
    created: float
    buffer: bytearray = field(default_factory=bytearray)   # encoded records (MemoryRecordsBuilder)
    record_count: int = 0
    max_timestamp: int = -1
    result: ProduceRequestResult | None = None
    size: int = 0
    closed: bool = False
    base_sequence: int | None = None                 # assigned at the first drain
    producer_id: int = -1
    producer_epoch: int = -1
    attempts: int = 0
    attempt_token: int = 0                           # bumped to disown an earlier send
    ever_sent: bool = False
    retry_at: float = 0.0
    done: bool = False
    _wire: object = None
    _wire_key: tuple | None = None
    time: Time = field(default=SYSTEM, repr=False)   # the producer's clock: waits on `result` count on it

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __post_init__(self):
        self.result = ProduceRequestResult(self.topic, self.partition, self.time)

    def has_reached_delivery_timeout(self, delivery_timeout: float, now: float) -> bool:
        return delivery_timeout <= now - self.created

    def try_append(self, key, value, ts, limit: int, n: int) -> FutureRecordMetadata | None:
        if self.closed or (self.record_count and self.size + n > limit):
            return None
        rb.encode_record(self.buffer, key, value, ts)
        if ts > self.max_timestamp:
            self.max_timestamp = ts
        self.size += n
        self.record_count += 1
        return FutureRecordMetadata(self.result, self.record_count - 1)

    def to_wire(self, transactional: bool = False):
        key = (self.producer_id, self.producer_epoch, self.base_sequence)
        if self._wire is None or self._wire_key != key:
            seq = rb.NO_SEQUENCE if self.base_sequence is None else self.base_sequence
            self._wire = rb.batch_from_encoded(bytes(self.buffer), self.record_count, self.max_timestamp,
                                               producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                               base_sequence=seq, transactional=transactional)
            self._wire_key = key
        return self._wire


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int, delivery_timeout_ms: int = 120000,
                 time: Time = SYSTEM):
        self.batch_size = batch_size
        self.linger = linger_ms / 1000.0
        self.buffer_memory = buffer_memory
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.time = time
        self.lock = threading.Condition(threading.Lock())
        self.batches: dict[tuple[str, int], collections.deque[ProducerBatch]] = {}
        self.pending_bytes = 0
        self.waiters = 0             # senders blocked on buffer.memory
        self.flushing = 0
        self.closed = False
        self.incomplete: set[ProducerBatch] = set()

    def append(self, topic: str, partition: int, key, value, ts: int, wake, callback=None) -> FutureRecordMetadata:
        n = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        with self.lock:
            while self.pending_bytes + n > self.buffer_memory and self.pending_bytes > 0 and not self.closed:
                self.waiters += 1
                try:     # re-checked every 0.1 s of the clock (a close does not notify)
                    self.time.wait_for(self.lock, lambda: self.closed or self.pending_bytes == 0
                                       or self.pending_bytes + n <= self.buffer_memory, 0.1)
                finally:
                    self.waiters -= 1
            if self.closed:
                raise RuntimeError("producer is closed")
            dq = self.batches.setdefault((topic, partition), collections.deque())
            fut = dq[-1].try_append(key, value, ts, self.batch_size, n) if dq else None
            if fut is None:
                if dq:
                    dq[-1].closed = True
                b = ProducerBatch(topic, partition, self.time.monotonic(), time=self.time)
                fut = b.try_append(key, value, ts, self.batch_size, n)
                dq.append(b)
                self.incomplete.add(b)
                wake()   # a new batch: the sender may be idle-waiting with nothing to send
            self.pending_bytes += n
            if callback is not None:      # the batch is open (in its deque, not drained): nothing completes it yet
                fut.add_thunk(callback)
            return fut

    def release(self, batch: ProducerBatch) -> None:
        """The batch is completed or failed: its bytes are free and a flush no longer waits on it."""
        with self.lock:
            self.incomplete.discard(batch)
            self.pending_bytes -= batch.size
            if self.waiters:
                self.lock.notify_all()

    def ready(self, now: float) -> tuple[list[tuple[str, int]], float]:
        """Partitions whose head batch may go now, and seconds until the next one may."""
        out, wait = [], 1.0
        with self.lock:
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                head = dq[0]
                if head.retry_at > now:
                    wait = min(wait, head.retry_at - now)
                    continue
                if len(dq) > 1 or not self.lingering(head, now):
                    out.append(tp)
                else:
                    wait = min(wait, head.created + self.linger - now)
        return out, max(wait, 0.0)

    def lingering(self, b: ProducerBatch, now: float) -> bool:
        """linger.ms: the open, not yet full batch waits (Kafka's batchReady: waitedTimeMs >= lingerMs sends)."""
        return not (b.closed or self.flushing or self.closed or b.size >= self.batch_size
                    or b.created + self.linger <= now)

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """delivery.timeout.ms: every waiting batch that has reached it, taken out (Kafka's expiredBatches)."""
        with self.lock:
            out = [b for dq in self.batches.values() for b in dq
                   if not b.done and b.has_reached_delivery_timeout(self.delivery_timeout, now)]
            for b in out:
                self.batches[b.tp].remove(b)
        return out

    def peek(self, tp) -> ProducerBatch | None:
        with self.lock:
            dq = self.batches.get(tp)
            return dq[0] if dq else None

    def pop(self, tp) -> ProducerBatch:
        with self.lock:
            b = self.batches[tp].popleft()
            b.closed = True
            return b

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch back ahead of unsent ones, in sequence order among retried ones."""
        with self.lock:
            dq = self.batches.setdefault(batch.tp, collections.deque())
            items = list(dq)
            i = 0
            while i < len(items) and items[i].base_sequence is not None and batch.base_sequence is not None \
                    and items[i].base_sequence < batch.base_sequence:
                i += 1
            if batch.base_sequence is None:
                while i < len(items) and items[i].base_sequence is not None:
                    i += 1
                while i < len(items) and items[i].ever_sent and items[i].created < batch.created:
                    i += 1
            items.insert(i, batch)
            self.batches[batch.tp] = collections.deque(items)

    def all_batches(self) -> list[ProducerBatch]:
        with self.lock:
            return [b for dq in self.batches.values() for b in dq]

    def incomplete_batches(self) -> list[ProducerBatch]:
        """Every batch not yet completed or failed, wherever it is (Kafka's incomplete.copyAll())."""
        with self.lock:
            return list(self.incomplete)

    def has_pending(self) -> bool:
        with self.lock:
            return any(self.batches.values())

    def begin_flush(self) -> None:
        with self.lock:
            self.flushing += 1

    def end_flush(self) -> None:
        with self.lock:
            self.flushing -= 1
