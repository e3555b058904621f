"""eoslab.common.time: MockTime moves only when told, and its waits end on clock moves, not real time."""
from __future__ import annotations

import threading

import pytest

from eoslab.common.time import SYSTEM, MockTime

pytestmark = pytest.mark.fast


def test_mock_time_moves_only_when_told():
    t = MockTime()
    w, m = t.milliseconds(), t.monotonic()
    assert (t.milliseconds(), t.monotonic()) == (w, m)
    t.sleep(1.5)
    assert t.milliseconds() == w + 1500 and t.monotonic() == pytest.approx(m + 1.5)
    with pytest.raises(ValueError):
        t.advance(-1)


def test_wall_step_leaves_the_monotonic_clock():
    t = MockTime()
    m = t.nanoseconds()
    t.set_wall_ms(t.milliseconds() - 60_000)
    assert t.nanoseconds() == m


def test_auto_tick_moves_the_clock_on_every_read():
    t = MockTime(auto_tick_ms=5)
    a = t.milliseconds()
    assert t.milliseconds() == a + 5


def test_wait_for_ends_at_the_mock_deadline_and_not_before():
    t, cond = MockTime(), threading.Condition()
    result = {}

    def waiter():
        with cond:
            result["ok"] = t.wait_for(cond, lambda: False, 30.0)
    th = threading.Thread(target=waiter)
    th.start()
    th.join(0.2)
    assert th.is_alive()                    # 30 mock seconds have not passed
    t.advance(29.9)
    th.join(0.2)
    assert th.is_alive()
    t.advance(0.2)
    th.join(5)
    assert not th.is_alive() and result["ok"] is False


def test_wait_for_returns_when_the_predicate_turns_true():
    t, cond, box = MockTime(), threading.Condition(), []

    def waiter():
        with cond:
            box.append(t.wait_for(cond, lambda: "x" in box, None))
    th = threading.Thread(target=waiter)
    th.start()
    with cond:
        box.append("x")
        cond.notify_all()
    th.join(5)
    assert box[-1] is True


def test_wait_event_on_the_mock_clock():
    t, ev = MockTime(), threading.Event()
    out = []
    th = threading.Thread(target=lambda: out.append(t.wait_event(ev, 10.0)))
    th.start()
    th.join(0.1)
    assert th.is_alive()
    t.advance(10.0)
    th.join(5)
    assert out == [False]
    ev.set()
    assert t.wait_event(ev, 1.0) is True


def test_system_time_waits_really():
    ev = threading.Event()
    assert SYSTEM.wait_event(ev, 0.0) is False
    assert abs(SYSTEM.milliseconds() / 1000 - SYSTEM.time()) < 1


def test_waiters_counts_the_parked_waits():
    t, ev = MockTime(), threading.Event()
    assert t.waiters() == 0
    th = threading.Thread(target=lambda: t.wait_event(ev, 5.0))
    th.start()
    for _ in range(500):
        if t.waiters() == 1:
            break
        ev.wait(0.01)
    assert t.waiters() == 1
    ev.set()
    th.join(5)
    assert t.waiters() == 0
