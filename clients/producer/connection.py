"""BrokerConnection: the producer's one ordered ProduceStream to a broker; Inbox: what reaches the Sender.

Guarantees: requests go out in the order `send` was called; every answer,
and the end of the stream (with why), is put on the sender's inbox as
("response", conn, answer) or ("closed", conn, why); `close` ends the
stream, optionally after letting already queued requests reach the broker.
The Inbox hands events over in the order they were put, and its wait for
the first one ends after `timeout` seconds of the Sender's clock (a `Time`),
so on a MockTime the Sender idles until the test moves the clock.
"""
from __future__ import annotations

import collections
import queue
import threading

import grpc

from eoslab.common.time import Time


class Inbox:
    """The Sender's event queue: answers and closes from the connections, wake-ups from `send`."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._events: collections.deque = collections.deque()

    def put(self, ev) -> None:
        with self._cond:
            self._events.append(ev)
            self._cond.notify_all()

    def take_all(self, time: Time, timeout: float) -> list:
        """Every event in, waiting up to `timeout` seconds of `time` for the first one."""
        with self._cond:
            if not self._events:
                time.wait_for(self._cond, lambda: bool(self._events), timeout)
            out = list(self._events)
            self._events.clear()
            return out


class BrokerConnection:
    """One ProduceStream: requests handled in order, answers matched by correlation id."""

    def __init__(self, address: str, stub, inbox: Inbox):
        self.address = address
        self.inbox = inbox
        self.q: queue.Queue = queue.Queue()
        self.in_flight: dict[int, tuple[float, dict]] = {}   # correlation id -> (sent at, {tp: (batch, token)})
        self.closed = False
        self.call = stub.ProduceStream(self._requests())
        self.reader = threading.Thread(target=self._read, name=f"producer-read-{address}", daemon=True)
        self.reader.start()

    def _requests(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            yield item

    def _read(self) -> None:
        why = "stream ended"
        try:
            for resp in self.call:
                self.inbox.put(("response", self, resp))
        except grpc.RpcError as e:
            why = e.code().name
        self.inbox.put(("closed", self, why))

    def send(self, req) -> None:
        self.q.put(req)

    def close(self, graceful_s: float = 0.0) -> None:
        """End the stream; with graceful_s, first let requests already queued reach the broker."""
        if not self.closed:
            self.closed = True
            self.q.put(None)
            if graceful_s > 0:
                self.reader.join(graceful_s)
            self.call.cancel()
