"""The coordinator's crash_after_prepare fault (services/txn_coordinator/faults.py), in one process.

The coordinator runs on the in-memory transaction log of test_transaction_coordinator; the
process exit is replaced by a function that records the code and raises, so the request that
wrote Prepare* ends there, as in a process that died. What the log then holds is loaded by a
second coordinator, which must complete the transaction (Kafka's loadTransactionsForTxnTopicPartition
followed by the markers): CompleteCommit (CompleteAbort) with every marker written.
"""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import faults_pb2
from services.txn_coordinator.faults import CRASH_EXIT_CODE, CoordinatorFaultInjectorService, CoordinatorFaultRegistry
from services.txn_coordinator.transaction_metadata import TransactionState as S
from tests.unit.test_transaction_coordinator import coordinator, end, init, wait_complete

pytestmark = pytest.mark.fast
PARTS = {("a", 0), ("a", 1)}


class Crashed(Exception):
    """What the injected exit raises: the process is gone from this point on."""


def crashing_coordinator():
    c, tsm, markers = coordinator()
    exits: list[int] = []

    def exit_process(code):
        exits.append(code)
        raise Crashed(code)
    reg = CoordinatorFaultRegistry(c.end_txn, c.transaction_open, exit_process=exit_process)
    return c, tsm, markers, reg, exits


def open_transaction(c):
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, PARTS) == E.NONE
    return r.producer_id, r.producer_epoch


def take_over(tsm):
    """A second coordinator loading the partition as the first left it in the log."""
    c2, tsm2, markers2 = coordinator()
    tsm2.records = list(tsm.records)
    tsm2.op.cache = {"t": tsm.replay("t")}
    tsm2.on_loaded(tsm2.op)
    return c2, tsm2, markers2


def test_the_coordinator_exits_once_prepare_commit_is_written_and_the_next_owner_commits():
    c, tsm, markers, reg, exits = crashing_coordinator()
    pid, epoch = open_transaction(c)
    reg.add_crash("t")
    with pytest.raises(Crashed):
        end(c, pid, epoch, commit=True)
    assert exits == [CRASH_EXIT_CODE]
    assert tsm.records[-1][0] == "t" and tsm.records[-1][1]["state"] == "PrepareCommit"
    assert markers.sent == []          # the marker thread starts after the hook: none went out
    [f] = reg.states().faults
    assert (f.remaining, f.applied) == (0, 1) and "PrepareCommit of t" in f.description

    c2, tsm2, markers2 = take_over(tsm)
    md = wait_complete(c2, tsm2)
    assert md.state == S.COMPLETE_COMMIT
    assert markers2.sent == [(pid, epoch, True, frozenset(PARTS))]
    assert tsm2.records[-1][1]["state"] == "CompleteCommit"
    assert end(c2, pid, epoch, commit=True).error == E.NONE              # the producer's retried EndTxn


def test_an_abort_fault_waits_for_prepare_abort_and_the_next_owner_aborts():
    c, tsm, markers, reg, exits = crashing_coordinator()
    reg.add_crash("t", prepare_abort=True)
    pid, epoch = open_transaction(c)
    assert end(c, pid, epoch, commit=True).error == E.NONE              # a commit passes the abort fault
    assert wait_complete(c, tsm).state == S.COMPLETE_COMMIT and exits == []
    assert c.add_partitions("t", pid, epoch, PARTS) == E.NONE
    with pytest.raises(Crashed):
        end(c, pid, epoch, commit=False)
    assert exits == [CRASH_EXIT_CODE] and tsm.records[-1][1]["state"] == "PrepareAbort"
    assert len(markers.sent) == 1                                      # only the first transaction's
    c2, tsm2, markers2 = take_over(tsm)
    assert wait_complete(c2, tsm2).state == S.COMPLETE_ABORT
    assert markers2.sent == [(pid, epoch, False, frozenset(PARTS))]


def test_other_ids_pass_and_clear_removes_the_fault():
    c, tsm, markers, reg, exits = crashing_coordinator()
    reg.add_crash("other")
    pid, epoch = open_transaction(c)
    assert end(c, pid, epoch).error == E.NONE
    assert wait_complete(c, tsm).state == S.COMPLETE_COMMIT
    reg.clear()
    reg.add_crash("t")
    reg.clear()
    assert c.add_partitions("t", pid, epoch, PARTS) == E.NONE
    assert end(c, pid, epoch).error == E.NONE
    assert wait_complete(c, tsm).state == S.COMPLETE_COMMIT and exits == [] and reg.states().faults == []


class Aborted(Exception):
    pass


class Ctx:
    def abort(self, code, details):
        raise Aborted(code, details)


def test_the_rpc_takes_the_new_kind_and_refuses_it_without_an_id():
    c, tsm, markers, reg, exits = crashing_coordinator()
    svc = CoordinatorFaultInjectorService(reg)
    r = svc.InjectFault(faults_pb2.InjectFaultRequest(crash_after_prepare=faults_pb2.CrashAfterPrepare(
        transactional_id="t", prepare_abort=True)), Ctx())
    assert r.fault_id.startswith("crash-after-prepare-")
    assert [f.fault_id for f in svc.ListFaults(faults_pb2.ListFaultsRequest(), Ctx()).faults] == [r.fault_id]
    with pytest.raises(Aborted, match="transactional_id"):
        svc.InjectFault(faults_pb2.InjectFaultRequest(crash_after_prepare=faults_pb2.CrashAfterPrepare()), Ctx())
    with pytest.raises(Aborted):
        svc.InjectFault(faults_pb2.InjectFaultRequest(drop_produce_responses=faults_pb2.DropProduceResponses(
            topic="x", partition=0, count=1)), Ctx())
    assert svc.ClearFaults(faults_pb2.ClearFaultsRequest(), Ctx()).faults == []


def test_without_fault_injection_the_coordinator_has_no_hook():
    c, tsm, markers = coordinator()
    assert c.after_prepare is None
    pid, epoch = open_transaction(c)
    assert end(c, pid, epoch).error == E.NONE
    assert wait_complete(c, tsm).state == S.COMPLETE_COMMIT
