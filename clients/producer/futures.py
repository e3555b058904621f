"""ProduceRequestResult and FutureRecordMetadata: one result per batch, a light future per record.

Guarantees: as in Kafka, a batch's result is set once (offset or error) and
every record future of the batch resolves from it; callbacks run once, on
the thread that completes the batch, or at once if it is already complete.
A record future offers the parts of concurrent.futures.Future the lab uses:
result, exception, done, add_done_callback. A send's own callback (Kafka's
`send(record, callback)`) is kept in its batch as a thunk, added under the
accumulator's lock while the batch is still open (so before any completion,
with no lock of its own), and called once with (RecordMetadata, None) or
(None, the error), in the order the records were appended, after the
add_done_callback callbacks. Waits with a timeout (`wait`, `result`,
`exception`) count seconds of the producer's clock (the `Time` given).
"""
from __future__ import annotations

import threading
from typing import NamedTuple

from eoslab.common.time import SYSTEM, Time


class RecordMetadata(NamedTuple):      # immutable and cheap to make: one per acknowledged record with a callback
    topic: str
    partition: int
    offset: int
    base_sequence: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1


class ProduceRequestResult:
    __slots__ = ("_event", "base_offset", "error", "_callbacks", "_lock", "topic", "partition",
                 "base_sequence", "producer_id", "producer_epoch", "thunks", "time")

    def __init__(self, topic: str, partition: int, time: Time = SYSTEM):
        self.time = time
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list = []
        self.thunks: list = []            # (callback, index in batch): appended only while the batch is open
        self.base_offset = -1
        self.error: BaseException | None = None
        self.topic, self.partition = topic, partition
        self.base_sequence, self.producer_id, self.producer_epoch = None, -1, -1

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.time.wait_event(self._event, timeout)

    def complete(self, base_offset: int, error: BaseException | None, base_sequence, pid: int, epoch: int) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.base_offset, self.error = base_offset, error
            self.base_sequence, self.producer_id, self.producer_epoch = base_sequence, pid, epoch
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
            thunks, self.thunks = self.thunks, []
        for fn in callbacks:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a user callback must not kill the sender
                pass
        if thunks:
            self._run_thunks(thunks)

    def metadata(self, index: int) -> RecordMetadata:
        """The acknowledged record at `index` in the batch (offset -1 when the broker gave none, acks=0)."""
        base, seq = self.base_offset, self.base_sequence
        return RecordMetadata(self.topic, self.partition, base + index if base >= 0 else -1,
                              None if seq is None else seq + index, self.producer_id, self.producer_epoch)

    def _run_thunks(self, thunks) -> None:
        err = self.error
        for cb, i in thunks:
            try:
                if err is not None:
                    cb(None, err)
                else:
                    cb(self.metadata(i), None)
            except Exception:  # noqa: BLE001 - a user callback must not kill the sender
                pass

    def on_done(self, fn) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn()


class FutureRecordMetadata:
    __slots__ = ("_result", "_index")

    def __init__(self, result: ProduceRequestResult, index: int):
        self._result, self._index = result, index

    def done(self) -> bool:
        return self._result.done()

    def _wait(self, timeout):
        if not self._result.wait(timeout):
            raise TimeoutError("record not acknowledged in time")

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._result.error

    def result(self, timeout: float | None = None):
        self._wait(timeout)
        if self._result.error is not None:
            raise self._result.error
        return self._result.metadata(self._index)

    def add_thunk(self, callback) -> None:
        """Keep a send's callback in the batch; only while the batch is open (under the accumulator's lock)."""
        self._result.thunks.append((callback, self._index))

    def add_done_callback(self, fn) -> None:
        self._result.on_done(lambda: fn(self))
