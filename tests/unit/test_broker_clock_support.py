"""WatchedClock: a MockTime that says which threads wait on it, for the broker clock tests.

Guarantees: `await_waiting(name)` returns only once a thread of that name waits on the clock with its
deadline already taken (MockTime takes the deadline before it registers the waiter), so a test that
advances the clock after it cannot race the rule's deadline; `step(name, seconds)` advances the clock
and returns once that thread has gone round its loop and waits again, so a periodic task (ISR check,
session expiry, watchdog) has run at least once at the new time. The tests below check the helper.
"""
from __future__ import annotations

import threading
from collections import Counter

import pytest

from eoslab.common.time import MockTime

pytestmark = pytest.mark.fast
REAL_TIMEOUT_S = 10.0       # how long a test waits (in real time) for a thread to get somewhere


class WatchedClock(MockTime):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._seen = threading.Condition()
        self.waiting: Counter[str] = Counter()      # thread name -> waits under way
        self.waits: Counter[str] = Counter()        # thread name -> waits begun

    def _listen(self, fn):
        remove = super()._listen(fn)
        name = threading.current_thread().name
        with self._seen:
            self.waiting[name] += 1
            self.waits[name] += 1
            self._seen.notify_all()

        def done():
            remove()
            with self._seen:
                self.waiting[name] -= 1
                self._seen.notify_all()
        return done

    def until(self, predicate, what: str) -> None:
        with self._seen:
            assert self._seen.wait_for(predicate, REAL_TIMEOUT_S), f"timed out waiting for {what}"

    def await_waiting(self, name: str) -> int:
        """Wait until a thread called `name` waits on this clock; the number of waits it has begun."""
        self.until(lambda: self.waiting[name] > 0, f"{name} to wait on the clock")
        with self._seen:
            return self.waits[name]

    def step(self, name: str, seconds: float) -> None:
        """Advance `seconds` while `name` waits, and return once it waits again (it went round its loop)."""
        begun = self.await_waiting(name)
        self.advance(seconds)
        self.until(lambda: self.waits[name] > begun and self.waiting[name] > 0, f"{name} to go round")


def until(predicate, what: str, timeout: float = REAL_TIMEOUT_S) -> None:
    """Wait (real time) for something another thread does; re-checks every 5 ms."""
    ev = threading.Event()
    for _ in range(int(timeout / 0.005)):
        if predicate():
            return
        ev.wait(0.005)
    assert predicate(), f"timed out waiting for {what}"


def start(name: str, fn) -> tuple[threading.Thread, dict]:
    """Run fn in a thread called `name`; its result (or exception) lands in the dict."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t, out


def test_await_waiting_sees_a_waiter_only_once_it_waits():
    clock, ev = WatchedClock(), threading.Event()
    t, out = start("waiter", lambda: clock.wait_event(ev, 5.0))
    clock.await_waiting("waiter")
    clock.advance(4.999)
    t.join(0.1)
    assert t.is_alive()
    clock.advance(0.001)
    t.join(REAL_TIMEOUT_S)
    assert out == {"result": False} and clock.waiting["waiter"] == 0


def test_step_returns_after_a_loop_went_round():
    clock, stop, rounds = WatchedClock(), threading.Event(), []

    def loop():
        while not clock.wait_event(stop, 1.0):
            rounds.append(clock.monotonic())
    t, _ = start("looper", loop)
    clock.step("looper", 1.0)
    assert rounds == [2.0]
    clock.step("looper", 3.0)
    assert rounds == [2.0, 5.0]
    stop.set()
    t.join(REAL_TIMEOUT_S)
    assert not t.is_alive()
