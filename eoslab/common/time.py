"""Time as Kafka injects it (`org.apache.kafka.common.utils.Time` / `MockTime`).

Guarantees: every timeout, expiry and backoff rule in the services and clients
reads time through a `Time` it was given, never through the `time` module, so
a test can put a rule on a `MockTime` and move the clock instead of sleeping.

- `milliseconds()` / `time()`: the wall clock (what Kafka stores in records
  and in transaction metadata: `txnStartTimestamp`, `txnLastUpdateTimestamp`).
- `monotonic()` / `nanoseconds()`: the clock for intervals (ISR lag, session
  timeouts, delivery timeouts, backoffs), which never goes back.
- `sleep(seconds)`: on `MockTime` it advances the clock and returns at once.
- `wait_for(cond, predicate, timeout)`: waits on a `threading.Condition` the
  caller holds until `predicate()` is true or `timeout` seconds of *this*
  clock pass; returns the predicate's last value. On `MockTime` the waiter is
  woken by every clock move, so a rule that waits (a held
  CONCURRENT_TRANSACTIONS, a long-poll fetch) ends when the test advances
  the clock past its deadline, and not before.
- `wait_event(event, timeout)`: `threading.Event.wait` on this clock.

`SYSTEM` is the one `SystemTime`; code takes `time: Time = SYSTEM`.
`MockTime` starts at a fixed wall time (or the one given), moves only by
`sleep`/`advance` (plus `auto_tick_ms` per read, as Kafka's MockTime), and its
wall and monotonic clocks move together unless a test jumps the wall clock
alone with `set_wall_ms` (a clock step, as NTP or an operator makes).
"""
from __future__ import annotations

import threading
import time as _time
from typing import Callable


class Time:
    """The interface. Subclasses give the four readings and `sleep`; the waits follow."""

    def time(self) -> float:                 # wall clock, seconds since the epoch
        raise NotImplementedError

    def monotonic(self) -> float:            # seconds, never goes back
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def milliseconds(self) -> int:
        return int(self.time() * 1000)

    def nanoseconds(self) -> int:
        return int(self.monotonic() * 1e9)

    def wait_for(self, cond: threading.Condition, predicate: Callable[[], bool], timeout: float | None) -> bool:
        raise NotImplementedError

    def wait_event(self, event: threading.Event, timeout: float | None) -> bool:
        raise NotImplementedError


class SystemTime(Time):
    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            _time.sleep(seconds)

    def wait_for(self, cond, predicate, timeout):
        return cond.wait_for(predicate, timeout)

    def wait_event(self, event, timeout):
        return event.wait(timeout)


SYSTEM = SystemTime()

# The start of a MockTime's wall clock unless given: 2026-01-01T00:00:00Z.
MOCK_EPOCH_MS = 1_767_225_600_000

# A waiter on MockTime re-checks at least this often in real seconds, so an Event set by
# another thread (which cannot notify the clock's listeners) is seen without a clock move.
_MOCK_POLL = 0.01


class MockTime(Time):
    """A clock that moves only when told (Kafka's MockTime). Thread-safe."""

    def __init__(self, wall_ms: int = MOCK_EPOCH_MS, monotonic_ns: int = 1_000_000_000, auto_tick_ms: int = 0):
        self._lock = threading.Lock()
        self._wall_ns = wall_ms * 1_000_000
        self._mono_ns = monotonic_ns
        self.auto_tick_ms = auto_tick_ms
        self._listeners: list[Callable[[], None]] = []

    # --- readings -------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.auto_tick_ms:
            self.advance(self.auto_tick_ms / 1000.0)

    def time(self) -> float:
        self._tick()
        with self._lock:
            return self._wall_ns / 1e9

    def milliseconds(self) -> int:
        self._tick()
        with self._lock:
            return self._wall_ns // 1_000_000

    def monotonic(self) -> float:
        self._tick()
        with self._lock:
            return self._mono_ns / 1e9

    def nanoseconds(self) -> int:
        self._tick()
        with self._lock:
            return self._mono_ns

    # --- moving the clock -----------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Both clocks move forward by `seconds`; every waiter re-checks its condition."""
        if seconds < 0:
            raise ValueError("MockTime moves forward only; use set_wall_ms to step the wall clock back")
        ns = int(round(seconds * 1e9))
        with self._lock:
            self._wall_ns += ns
            self._mono_ns += ns
            listeners = list(self._listeners)
        for fn in listeners:
            fn()

    def advance_ms(self, ms: int) -> None:
        self.advance(ms / 1000.0)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def set_wall_ms(self, wall_ms: int) -> None:
        """Step the wall clock alone (forward or back); the monotonic clock does not move."""
        with self._lock:
            self._wall_ns = wall_ms * 1_000_000
            listeners = list(self._listeners)
        for fn in listeners:
            fn()

    # --- waits ----------------------------------------------------------------------------
    def waiters(self) -> int:
        """How many waits (wait_for / wait_event) are parked on this clock now: a test moves the clock once
        the rule it tests has set its deadline."""
        with self._lock:
            return len(self._listeners)

    def _listen(self, fn: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(fn)

        def remove():
            with self._lock:
                self._listeners.remove(fn)
        return remove

    def wait_for(self, cond, predicate, timeout):
        deadline = None if timeout is None else self.nanoseconds() + int(timeout * 1e9)

        def wake():
            with cond:
                cond.notify_all()
        remove = self._listen(wake)
        try:
            while True:
                ok = predicate()
                if ok or (deadline is not None and self.nanoseconds() >= deadline):
                    return ok
                cond.wait(_MOCK_POLL)
        finally:
            remove()

    def wait_event(self, event, timeout):
        moved = threading.Event()
        deadline = None if timeout is None else self.nanoseconds() + int(timeout * 1e9)
        remove = self._listen(moved.set)
        try:
            while not event.is_set():
                if deadline is not None and self.nanoseconds() >= deadline:
                    return False
                moved.wait(_MOCK_POLL)
                moved.clear()
            return True
        finally:
            remove()
