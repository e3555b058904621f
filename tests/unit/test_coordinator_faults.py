"""The coordinator's delayed EndTxn copy (services/txn_coordinator/faults.py) against TransactionCoordinator.

The copy is handed to the same coordinator as the original, so what it does is
decided by the coordinator's own epoch rules: before the epoch bump per
transaction (KIP-890 part 2) the copy of transaction 1's commit ends
transaction 2; with it, the copy is fenced and transaction 2 stays open.
"""
import threading

import pytest

from eoslab.common.errors import E
from eoslab.v1 import faults_pb2, txn_pb2
from services.txn_coordinator.faults import CoordinatorFaultRegistry
from services.txn_coordinator.transaction_metadata import TransactionState as S
from tests.unit.test_transaction_coordinator import coordinator, end, init, wait_complete

pytestmark = pytest.mark.fast


def wait_applied(reg: CoordinatorFaultRegistry, n: int) -> faults_pb2.FaultState:
    for _ in range(300):
        f = reg.states().faults[0]
        if f.applied >= n:
            return f
        threading.Event().wait(0.01)
    raise AssertionError(f"only {reg.states().faults[0].applied} copies handled")


def two_transactions(epoch_bump: bool):
    """Transaction 1 committed with the fault on; transaction 2 open when the copy arrives."""
    c, tsm, markers = coordinator(epoch_bump_per_txn=epoch_bump)
    arrive = threading.Event()                      # the copy is held until transaction 2 has begun
    reg = CoordinatorFaultRegistry(lambda r: arrive.wait(10) and c.end_txn(r), seed=1)
    reg.add_replay("t", count=1, min_delay_ms=0, max_delay_ms=0)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    req_done = end(c, pid, epoch)
    assert req_done.error == E.NONE
    reg.after_end_txn(txn_pb2.EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                            committed=True))
    wait_complete(c, tsm)
    pid2, epoch2 = (req_done.producer_id, req_done.producer_epoch) if epoch_bump else (pid, epoch)
    assert c.add_partitions("t", pid2, epoch2, {("a", 1)}) == E.NONE      # transaction 2 begins
    arrive.set()
    fault = wait_applied(reg, 1)
    return c, tsm, markers, fault, (pid2, epoch2)


def test_without_epoch_bump_the_late_copy_commits_the_next_transaction():
    c, tsm, markers, fault, (pid, epoch) = two_transactions(epoch_bump=False)
    assert list(fault.answers) == ["NONE"]
    md = wait_complete(c, tsm)
    assert md.state == S.COMPLETE_COMMIT
    assert markers.sent[-1][2] is True and markers.sent[-1][3] == frozenset({("a", 1)})   # transaction 2's
    # the application now aborts the transaction it believes open: too late
    assert end(c, pid, epoch, commit=False).error != E.NONE


def test_with_epoch_bump_the_late_copy_is_fenced_and_the_next_transaction_stays_open():
    c, tsm, markers, fault, (pid, epoch) = two_transactions(epoch_bump=True)
    assert list(fault.answers) == ["PRODUCER_FENCED"]
    md = tsm.op.cache["t"]
    assert md.state == S.ONGOING and md.partitions == {("a", 1)}
    assert end(c, pid, epoch, commit=False).error == E.NONE


def test_count_and_transactional_id_limit_the_copies_and_clear_cancels_pending_ones():
    handled = []
    reg = CoordinatorFaultRegistry(lambda r: handled.append(r.transactional_id) or
                                   type("R", (), {"error": E.NONE})(), seed=1)
    reg.add_replay("t", count=2, min_delay_ms=0, max_delay_ms=0)
    for tid in ("other", "t", "t", "t"):
        reg.after_end_txn(txn_pb2.EndTxnRequest(transactional_id=tid, producer_id=1, producer_epoch=0))
    f = wait_applied(reg, 2)
    assert (f.remaining, sorted(handled)) == (0, ["t", "t"])
    reg.add_replay("", count=1, min_delay_ms=5000, max_delay_ms=5000)   # any id, far in the future
    reg.after_end_txn(txn_pb2.EndTxnRequest(transactional_id="x", producer_id=1, producer_epoch=0))
    reg.clear()
    threading.Event().wait(0.1)
    assert reg.states().faults == [] and handled == ["t", "t"]


def test_a_copy_for_the_next_transaction_waits_until_that_transaction_is_open():
    c, tsm, markers = coordinator()
    reg = CoordinatorFaultRegistry(
        c.end_txn, lambda tid: any(d.state == "Ongoing" and d.partitions for d in c.describe({tid})), seed=1)
    reg.add_replay("t", count=1, min_delay_ms=0, max_delay_ms=0, next_transaction=True)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    req = txn_pb2.EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch, committed=True)
    assert c.end_txn(req).error == E.NONE
    reg.after_end_txn(req)
    wait_complete(c, tsm)
    threading.Event().wait(0.2)
    assert reg.states().faults[0].applied == 0          # no transaction open: the copy is still held
    assert c.add_partitions("t", pid, epoch, {("a", 1)}) == E.NONE
    threading.Event().wait(0.05)
    assert reg.states().faults[0].applied == 0          # open, but nothing written (verified) yet
    reg.note_verified("t")                              # a broker verified transaction 2's first write
    assert list(wait_applied(reg, 1).answers) == ["NONE"]
    assert wait_complete(c, tsm).state == S.COMPLETE_COMMIT   # the copy ended transaction 2


def test_transaction_open_reads_one_ids_state():
    # what the copy waits for: an Ongoing transaction of the id with partitions, on this coordinator
    c, tsm, markers = coordinator(epoch_bump_per_txn=True)
    assert not c.transaction_open("t")              # never initialised here
    r = init(c)
    assert not c.transaction_open("t")              # Empty
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    assert c.transaction_open("t") and not c.transaction_open("other")
    assert end(c, r.producer_id, r.producer_epoch).error == E.NONE
    wait_complete(c, tsm)
    assert not c.transaction_open("t")
