"""The transaction coordinator's timeout and expiry rules on a MockTime (Kafka's rules, Kafka's clock).

Guarantees checked here, each by moving the mock clock and running the
periodic pass (`abort_timed_out_transactions`, `expire_transactional_ids`)
directly, as Kafka's tests drive its MockScheduler:
- transaction.timeout.ms (Kafka's timedOutTransactions / abortTimedOutTransactions):
  an Ongoing transaction is aborted with an epoch fence (PrepareAbort at
  epoch + 1, ABORT markers at that epoch, the old epoch PRODUCER_FENCED) once
  its start + timeout is *before* now (strictly: `start + timeout < now`);
  one inside its timeout, or exactly at it, is left alone;
- transactional.id.expiration.ms (Kafka's shouldExpire): an Empty or
  Complete* id whose last update is at least that long ago
  (`last_update <= now - expiration`) is written as a tombstone and
  forgotten; an Ongoing one never is; any transition restarts its idle time;
- both rules read the coordinator's WALL clock, as Kafka's do
  (`time.milliseconds()`): a wall-clock step moves them, the monotonic clock
  does not. See the step tests for what that means.
No test sleeps: the clock moves only when a test moves it.
"""
import pytest

from eoslab.common.errors import E
from eoslab.common.time import MOCK_EPOCH_MS, MockTime
from services.txn_coordinator.transaction_metadata import TransactionState
from tests.unit.test_transaction_coordinator import coordinator, end, init, wait_complete

pytestmark = pytest.mark.fast
S = TransactionState
TIMEOUT_MS = 60_000          # what init() asks for (transaction.timeout.ms)
HOUR_MS = 3_600_000


def open_transaction(expiration_ms: int = 7 * 24 * HOUR_MS):
    """A coordinator on a MockTime with one Ongoing transaction of "t" begun at the clock's start."""
    clock = MockTime()
    c, tsm, markers = coordinator(time=clock, expiration_ms=expiration_ms)
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    return clock, c, tsm, markers, r.producer_id, r.producer_epoch


def states(tsm, tid="t"):
    return [v["state"] if v else None for t, v in tsm.records if t == tid]


# -- transaction.timeout.ms ---------------------------------------------------------------------------
def test_the_transaction_start_is_stamped_with_the_wall_clock_and_the_timeout_counts_from_it():
    clock, c, tsm, _, pid, epoch = open_transaction()
    md = tsm.op.cache["t"]
    assert md.txn_start_ms == md.txn_last_update_ms == MOCK_EPOCH_MS
    clock.advance_ms(5_000)
    assert c.add_partitions("t", pid, epoch, {("a", 1)}) == E.NONE     # more partitions: same transaction
    assert (md.txn_start_ms, md.txn_last_update_ms) == (MOCK_EPOCH_MS, MOCK_EPOCH_MS + 5_000)
    clock.advance_ms(TIMEOUT_MS - 5_000 + 1)  # the timeout counts from the start, not from the last add
    c.abort_timed_out_transactions()
    assert wait_complete(c, tsm).producer_epoch == epoch + 1


def test_a_transaction_inside_its_timeout_is_not_aborted():
    clock, c, tsm, markers, pid, epoch = open_transaction()
    clock.advance_ms(TIMEOUT_MS - 1)
    c.abort_timed_out_transactions()
    clock.advance_ms(1)                       # exactly start + timeout: Kafka aborts only after it (<)
    c.abort_timed_out_transactions()
    md = tsm.op.cache["t"]
    assert (md.state, md.producer_epoch, md.pending_state) == (S.ONGOING, epoch, None)
    assert states(tsm) == ["Empty", "Ongoing"] and markers.sent == []
    assert end(c, pid, epoch).error == E.NONE     # the producer commits as usual


def test_a_transaction_past_its_timeout_is_fenced_and_aborted():
    clock, c, tsm, markers, pid, epoch = open_transaction()
    clock.advance_ms(TIMEOUT_MS + 1)
    c.abort_timed_out_transactions()
    md = wait_complete(c, tsm)
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_ABORT, pid, epoch + 1)
    assert md.last_producer_epoch == -1                          # a fence keeps no last epoch
    assert markers.sent == [(pid, epoch + 1, False, frozenset({("a", 0)}))]
    assert states(tsm) == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
    assert [v["epoch"] for _, v in tsm.records[2:]] == [epoch + 1, epoch + 1]
    # the producer that held the transaction learns it was fenced
    assert end(c, pid, epoch).error == E.PRODUCER_FENCED
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.PRODUCER_FENCED
    c.abort_timed_out_transactions()                             # nothing Ongoing: nothing more happens
    assert len(tsm.records) == 4


def test_the_timeout_is_the_one_the_producer_asked_for():
    clock, c, tsm, _, _, _ = open_transaction()
    md = tsm.op.cache["t"]
    assert md.txn_timeout_ms == TIMEOUT_MS
    with md.lock:
        md.txn_timeout_ms = 10 * TIMEOUT_MS                      # as if init had asked for ten minutes
    clock.advance_ms(TIMEOUT_MS + 1)
    c.abort_timed_out_transactions()
    assert md.state == S.ONGOING


def test_the_periodic_pass_runs_both_rules():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, expiration_ms=TIMEOUT_MS)
    idle = init(c, tid="idle")
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    clock.advance_ms(TIMEOUT_MS + 1)
    c.run_periodic_checks()
    assert "idle" not in tsm.op.cache and idle.producer_id >= 0
    assert wait_complete(c, tsm).producer_epoch == r.producer_epoch + 1


def test_the_background_loop_runs_the_pass_every_check_interval_of_the_clock():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, check_interval_ms=1_000)
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    c.start()
    try:
        clock.advance_ms(TIMEOUT_MS + 1)      # the loop wakes on the move and finds the transaction timed out
        assert wait_complete(c, tsm).state == S.COMPLETE_ABORT
    finally:
        c.stop()


# -- transactional.id.expiration.ms -----------------------------------------------------------------
EXPIRATION_MS = 10_000


def test_an_idle_empty_id_expires_and_its_next_init_gets_a_new_producer_id():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, expiration_ms=EXPIRATION_MS)
    first = init(c)
    clock.advance_ms(EXPIRATION_MS - 1)
    c.expire_transactional_ids()
    assert tsm.op.cache["t"].state == S.EMPTY
    clock.advance_ms(1)                       # last update <= now - expiration: Kafka expires it
    c.expire_transactional_ids()
    assert "t" not in tsm.op.cache
    assert tsm.records[-1] == ("t", None)                        # a tombstone in __transaction_state
    again = init(c)
    assert (again.error, again.producer_epoch) == (E.NONE, 0) and again.producer_id != first.producer_id


def test_a_completed_id_expires_counting_from_its_completion():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, expiration_ms=EXPIRATION_MS)
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    clock.advance_ms(5_000)
    assert end(c, r.producer_id, r.producer_epoch).error == E.NONE
    md = wait_complete(c, tsm)
    assert md.txn_last_update_ms == MOCK_EPOCH_MS + 5_000
    clock.advance_ms(EXPIRATION_MS - 1)
    c.expire_transactional_ids()
    assert tsm.op.cache["t"] is md
    clock.advance_ms(1)
    c.expire_transactional_ids()
    assert "t" not in tsm.op.cache and md.state == S.DEAD


def test_an_ongoing_transaction_never_expires():
    clock, c, tsm, _, pid, epoch = open_transaction(expiration_ms=EXPIRATION_MS)
    clock.advance_ms(5 * EXPIRATION_MS)       # (its timeout, 60 s, is not checked here)
    c.expire_transactional_ids()
    md = tsm.op.cache["t"]
    assert (md.state, md.pending_state) == (S.ONGOING, None)
    assert end(c, pid, epoch).error == E.NONE


def test_an_id_used_recently_is_kept():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, expiration_ms=EXPIRATION_MS)
    first = init(c)
    clock.advance_ms(EXPIRATION_MS - 1_000)
    second = init(c)                          # the application restarted: a transition, a new stamp
    clock.advance_ms(EXPIRATION_MS - 1_000)   # 18 s since the first init, 9 s since the second
    c.expire_transactional_ids()
    assert tsm.op.cache["t"].producer_epoch == second.producer_epoch == first.producer_epoch + 1
    clock.advance_ms(1_000)
    c.expire_transactional_ids()
    assert "t" not in tsm.op.cache


# -- wall-clock steps ---------------------------------------------------------------------------------
def test_a_wall_clock_step_forward_aborts_a_live_transaction_as_kafka_does():
    """Kafka compares txnStartTimestamp + txnTimeoutMs with time.milliseconds(), the wall clock: when
    NTP or an operator steps the coordinator's clock forward past the timeout, the next pass aborts
    every open transaction and bumps its epoch, though its producer is alive and well within its
    timeout by any real measure. The producer then gets PRODUCER_FENCED with no zombie anywhere —
    the "fenced but no zombie" confusion. The lab does the same: same clock, same rule."""
    clock, c, tsm, markers, pid, epoch = open_transaction()
    clock.advance_ms(1_000)                   # one real second into a 60 s transaction
    clock.set_wall_ms(MOCK_EPOCH_MS + HOUR_MS)
    c.abort_timed_out_transactions()
    md = wait_complete(c, tsm)
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    assert markers.sent[-1][1:3] == (epoch + 1, False)
    assert end(c, pid, epoch).error == E.PRODUCER_FENCED       # fenced, but no other instance exists


def test_a_wall_clock_step_forward_expires_idle_ids():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock, expiration_ms=EXPIRATION_MS)
    init(c)
    clock.set_wall_ms(MOCK_EPOCH_MS + EXPIRATION_MS)            # no time passed on the monotonic clock
    c.expire_transactional_ids()
    assert "t" not in tsm.op.cache


def test_a_wall_clock_step_back_keeps_a_transaction_open_past_its_timeout_as_kafka_does():
    """The other way, Kafka's rule (wall clock) lets a transaction outlive its timeout: after a step
    back of an hour it is aborted only once the wall clock is past start + timeout again, an hour
    and a minute of real time later. Until then it holds back the LSO of its partitions."""
    clock, c, tsm, _, pid, epoch = open_transaction()
    clock.set_wall_ms(MOCK_EPOCH_MS - HOUR_MS)
    clock.advance_ms(2 * TIMEOUT_MS)          # two timeouts of real (monotonic) time later
    c.abort_timed_out_transactions()
    md = tsm.op.cache["t"]
    assert (md.state, md.producer_epoch) == (S.ONGOING, epoch)
    clock.set_wall_ms(MOCK_EPOCH_MS + TIMEOUT_MS + 1)           # the wall clock is past start + timeout
    c.abort_timed_out_transactions()
    assert wait_complete(c, tsm).producer_epoch == epoch + 1


def test_after_a_step_back_a_new_transaction_is_stamped_with_the_stepped_wall_clock():
    clock = MockTime()
    c, tsm, _ = coordinator(time=clock)
    r = init(c)
    clock.set_wall_ms(MOCK_EPOCH_MS - HOUR_MS)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    assert tsm.op.cache["t"].txn_start_ms == MOCK_EPOCH_MS - HOUR_MS
    assert tsm.records[-1][1]["start_ms"] == MOCK_EPOCH_MS - HOUR_MS   # as written to __transaction_state
    clock.advance_ms(TIMEOUT_MS + 1)          # its timeout counts from that stamp
    c.abort_timed_out_transactions()
    assert wait_complete(c, tsm).state == S.COMPLETE_ABORT


# -- wiring ---------------------------------------------------------------------------------------------
def test_the_server_hands_its_clock_to_every_part(monkeypatch):
    from services.txn_coordinator.server import TransactionCoordinatorServer
    monkeypatch.setenv("EOSLAB_CLUSTER_SECRET", "test")
    clock = MockTime()
    s = TransactionCoordinatorServer(1, "127.0.0.1:0", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3",
                                     enable_fault_injection=True, time=clock)
    try:
        parts = {"coordinator": s.coordinator, "state manager": s.tsm, "markers": s.markers,
                 "producer ids": s.pids, "faults": s.faults}
        assert {name: p.time is clock for name, p in parts.items()} == dict.fromkeys(parts, True)
    finally:
        s.tsm.close()
        s.markers.close()
