"""The transaction coordinator's waits on a MockTime: the CONCURRENT_TRANSACTIONS hold and the delayed EndTxn copy.

Guarantees checked here:
- an AddPartitionsToTxn that arrives while the previous transaction completes
  is held for `concurrent_hold_ms` of the coordinator's monotonic clock: it
  ends with NONE as soon as the completion lands (the clock need not move),
  else with CONCURRENT_TRANSACTIONS exactly when the clock reaches the
  deadline, not a tick before; a wall-clock step does not end it;
- a delayed copy of an EndTxn (faults.py) is handed to the coordinator when
  the clock passes its delay, not before, and a copy still held when the
  faults are cleared is dropped at once.
A held request waits on the clock (it registers with the MockTime) before the
test moves it; a test never sleeps to let something happen.
"""
import threading

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MOCK_EPOCH_MS, MockTime
from eoslab.v1 import txn_pb2
from services.txn_coordinator.faults import CoordinatorFaultRegistry
from services.txn_coordinator.transaction_metadata import TransactionState
from tests.unit.test_transaction_coordinator import coordinator, end, init
from tests import helpers as h

pytestmark = pytest.mark.fast
S = TransactionState
HOLD_MS = 60_000        # long, so a hold that ran on the real clock could not end inside the test
STILL = 0.1             # real seconds given to a waiter that must NOT return




def held_add_partitions(hold_ms=HOLD_MS):
    """Transaction 1 committed, its markers held; transaction 2's AddPartitionsToTxn is in the hold."""
    clock = MockTime()
    c, tsm, markers = coordinator(time=clock, concurrent_hold_ms=hold_ms)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    markers.gate.clear()                                       # the markers are on their way
    assert end(c, pid, epoch).error == E.NONE
    answer = {}
    t = threading.Thread(target=lambda: answer.setdefault("err", c.add_partitions("t", pid, epoch, {("a", 1)})),
                         daemon=True)
    t.start()
    h.wait_for(lambda: clock.waiters() == 1)               # held: its deadline is set on the clock
    return clock, c, tsm, markers, t, answer


def test_the_hold_ends_when_the_previous_transaction_completes_without_the_clock_moving():
    clock, c, tsm, markers, t, answer = held_add_partitions()
    markers.gate.set()
    t.join(5)
    assert answer == {"err": E.NONE}
    md = tsm.op.cache["t"]
    assert md.state == S.ONGOING and md.partitions == {("a", 1)}
    assert [v["state"] for _, v in tsm.records][-2:] == ["CompleteCommit", "Ongoing"]
    assert clock.milliseconds() == MOCK_EPOCH_MS


def test_the_hold_ends_at_its_deadline_on_the_clock_with_concurrent_transactions():
    clock, c, tsm, markers, t, answer = held_add_partitions()
    clock.advance_ms(HOLD_MS - 1)
    t.join(STILL)
    assert t.is_alive() and answer == {}                      # one millisecond early: still held
    clock.advance_ms(1)
    t.join(5)
    assert answer == {"err": E.CONCURRENT_TRANSACTIONS}
    assert tsm.op.cache["t"].state == S.PREPARE_COMMIT        # nothing was added
    markers.gate.set()


def test_a_wall_clock_step_does_not_end_the_hold():
    clock, c, tsm, markers, t, answer = held_add_partitions()
    clock.set_wall_ms(MOCK_EPOCH_MS + 24 * 3_600_000)        # the hold is an interval: monotonic clock
    t.join(STILL)
    assert t.is_alive() and answer == {}
    markers.gate.set()
    t.join(5)
    assert answer == {"err": E.NONE}


def test_no_hold_answers_at_once():
    c, tsm, markers = coordinator(time=MockTime(), concurrent_hold_ms=0)
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    markers.gate.clear()
    assert end(c, r.producer_id, r.producer_epoch).error == E.NONE
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 1)}) == E.CONCURRENT_TRANSACTIONS
    markers.gate.set()


# -- the delayed EndTxn copy --------------------------------------------------------------------------
class Handled:
    def __init__(self):
        self.requests = []

    def __call__(self, request):
        self.requests.append(request)
        return txn_pb2.EndTxnResponse(error=E.NONE)


def held_copy(delay_ms=5_000):
    clock, handled = MockTime(), Handled()
    reg = CoordinatorFaultRegistry(handled, seed=1, time=clock)
    reg.add_replay("t", count=1, min_delay_ms=delay_ms, max_delay_ms=delay_ms)
    reg.after_end_txn(txn_pb2.EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, committed=True))
    h.wait_for(lambda: clock.waiters() == 1)               # the copy waits out its delay on the clock
    return clock, reg, handled


def test_a_copy_is_handed_over_when_the_clock_passes_its_delay():
    clock, reg, handled = held_copy()
    clock.advance_ms(4_999)
    threading.Event().wait(STILL)
    assert handled.requests == [] and reg.states().faults[0].applied == 0
    clock.advance_ms(1)
    h.wait_for(lambda: reg.states().faults[0].applied == 1)
    assert [r.transactional_id for r in handled.requests] == ["t"]
    assert list(reg.states().faults[0].answers) == ["NONE"]


def test_a_held_copy_is_dropped_at_once_when_the_faults_are_cleared():
    clock, reg, handled = held_copy()
    reg.clear()
    h.wait_for(lambda: clock.waiters() == 0)               # the copy gave up without the clock moving
    clock.advance_ms(10_000)
    assert handled.requests == [] and reg.states().faults == []
