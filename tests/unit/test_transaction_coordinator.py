"""TransactionCoordinator's rules in one process, as Kafka's TransactionCoordinatorTest checks them.

The coordinator runs against an in-memory transaction log (a stand-in for the
__transaction_state partition: every record it appends is kept as JSON and
can be replayed), a marker channel that can be held, and a producer-id block;
the same coordinator against real brokers is in tests/integration.
"""
import itertools
import threading
import time

import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, txn_pb2
from eoslab.common.record_batch import MAX_PRODUCER_EPOCH
from services.txn_coordinator.transaction_coordinator import TransactionCoordinator
from services.txn_coordinator.transaction_metadata import (TransactionMetadata, TransactionState,
                                                           TxnTransitMetadata)
from services.txn_coordinator.transaction_state_manager import OwnedPartition

pytestmark = pytest.mark.fast
S = TransactionState


class InMemoryTransactionLog:
    """owner_of / append / all_owned over one owned partition; appended transits are kept as JSON."""

    def __init__(self):
        self.op = OwnedPartition(0, coordinator_epoch=1, loading=False)
        self.records: list[tuple[str, dict | None]] = []
        self.on_loaded = None

    def owner_of(self, tid):
        return E.NONE, self.op

    def all_owned(self):
        return [self.op]

    def append(self, op, tid, transit):
        self.records.append((tid, None if transit is None else transit.to_json(op.coordinator_epoch)))
        return E.NONE

    def replay(self, tid) -> TransactionMetadata:
        d = [v for t, v in self.records if t == tid][-1]
        return TransactionMetadata.from_transit(tid, TxnTransitMetadata.from_json(d))


class Markers:
    """Writes nothing; `hold` keeps send_markers waiting until `release`."""

    def __init__(self):
        self.sent = []
        self.gate = threading.Event()
        self.gate.set()
        self.done = threading.Event()

    def send_markers(self, pid, epoch, coordinator_epoch, committed, parts, still_owner):
        self.gate.wait(10)
        self.sent.append((pid, epoch, committed, frozenset(parts)))
        self.done.set()
        return E.NONE


class Pids:
    def __init__(self, start=1000):
        self.ids = itertools.count(start)

    def generate_producer_id(self):
        return E.NONE, next(self.ids)


def coordinator(**kw):
    tsm, markers = InMemoryTransactionLog(), Markers()
    return TransactionCoordinator(tsm, markers, Pids(), **kw), tsm, markers


def init(c, pid=-1, epoch=-1, tid="t"):
    return c.init_producer_id(broker_pb2.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                                               producer_id=pid, producer_epoch=epoch))


def end(c, pid, epoch, commit=True, tid="t"):
    return c.end_txn(txn_pb2.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                           committed=commit))


def wait_complete(c, tsm, tid="t"):
    md = tsm.op.cache[tid]
    for _ in range(200):
        with md.lock:
            if md.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and md.pending_state is None:
                return md
        threading.Event().wait(0.01)
    raise AssertionError(f"{tid} stayed in {md.state}")


def test_an_init_claiming_an_epoch_two_plain_inits_old_is_fenced():
    c, tsm, _ = coordinator()
    first = init(c)
    second = init(c)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    zombie = init(c, first.producer_id, 0)                  # the instance the second init replaced
    assert zombie.error == E.PRODUCER_FENCED
    assert tsm.op.cache["t"].producer_epoch == 1            # and nothing changed for the live one


def test_kip360_bump_and_its_retry_survive_a_reload():
    c, tsm, _ = coordinator()
    first = init(c)
    bumped = init(c, first.producer_id, 0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    assert init(c, first.producer_id, 0).producer_epoch == 1        # a retry of the bump: the same epoch
    md = tsm.replay("t")
    assert (md.producer_epoch, md.last_producer_epoch) == (1, 0)     # what a new coordinator would load


def test_version_0_11_ignores_the_pair_an_init_carries():
    c, _, _ = coordinator(init_with_producer_id=False)
    first = init(c)
    assert init(c, first.producer_id, 77).producer_epoch == 1     # the field does not exist in v0/v1


def test_a_pending_epoch_fence_is_concurrent_transactions_not_fenced():
    c, tsm, markers = coordinator()
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    md = tsm.op.cache["t"]
    with md.lock:
        md.prepare_fence_producer_epoch()                    # an init or a timeout began fencing
    assert c.add_partitions("t", pid, epoch, {("a", 1)}) == E.CONCURRENT_TRANSACTIONS
    assert end(c, pid, epoch).error == E.CONCURRENT_TRANSACTIONS
    with md.lock:
        md.abort_transition()


def test_the_fence_then_answers_fenced_and_records_no_last_epoch():
    c, tsm, markers = coordinator()
    r = init(c)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE
    assert init(c).error == E.CONCURRENT_TRANSACTIONS            # a second instance: fence and abort first
    wait_complete(c, tsm)
    assert c.add_partitions("t", r.producer_id, r.producer_epoch, {("a", 0)}) == E.PRODUCER_FENCED
    assert init(c, r.producer_id, r.producer_epoch).error == E.PRODUCER_FENCED   # not a "retry" after a fence
    assert markers.sent[-1][1:3] == (r.producer_epoch + 1, False)


def test_kip890_producer_id_rotation_does_not_break_the_next_transaction():
    c, tsm, markers = coordinator(epoch_bump_per_txn=True)
    r = init(c)
    md = tsm.op.cache["t"]
    with md.lock:
        md.producer_epoch = MAX_PRODUCER_EPOCH - 2         # near exhaustion: the next EndTxn bumps to 32766
    pid, epoch = r.producer_id, MAX_PRODUCER_EPOCH - 2
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    done = end(c, pid, epoch)
    assert (done.error, done.producer_id, done.producer_epoch) == (E.NONE, pid, MAX_PRODUCER_EPOCH - 1)
    wait_complete(c, tsm)
    assert c.add_partitions("t", pid, MAX_PRODUCER_EPOCH - 1, {("a", 0)}) == E.NONE
    markers.gate.clear()                                    # hold this transaction's markers
    rotated = end(c, pid, MAX_PRODUCER_EPOCH - 1)
    assert rotated.error == E.NONE and rotated.producer_id != pid and rotated.producer_epoch == 0
    new_pid = rotated.producer_id
    # the client goes on at once with what EndTxn returned, while the markers are still out:
    assert c.add_partitions("t", new_pid, 0, {("a", 0)}) == E.CONCURRENT_TRANSACTIONS
    markers.gate.set()
    wait_complete(c, tsm)
    assert markers.sent[-1][:2] == (pid, MAX_PRODUCER_EPOCH)     # markers carry the old id, last epoch
    assert c.add_partitions("t", new_pid, 0, {("a", 0)}) == E.NONE
    assert tsm.replay("t").producer_id == new_pid
    # the old id is gone for good
    assert c.add_partitions("t", pid, MAX_PRODUCER_EPOCH - 1, {("a", 1)}) == E.INVALID_PRODUCER_ID_MAPPING


def test_an_add_partitions_while_the_last_transaction_completes_waits_for_it():
    c, tsm, markers = coordinator(concurrent_hold_ms=2000)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    markers.gate.clear()                                     # the markers are on their way
    assert end(c, pid, epoch).error == E.NONE
    threading.Timer(0.2, markers.gate.set).start()
    assert c.add_partitions("t", pid, epoch, {("a", 1)}) == E.NONE     # not CONCURRENT_TRANSACTIONS
    md = tsm.op.cache["t"]
    assert md.state == S.ONGOING and md.partitions == {("a", 1)}
    assert [v["state"] for t, v in tsm.records][-2:] == ["CompleteCommit", "Ongoing"]


def test_the_hold_is_bounded_and_then_concurrent_transactions():
    c, tsm, markers = coordinator(concurrent_hold_ms=100)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    markers.gate.clear()
    assert end(c, pid, epoch).error == E.NONE
    t0 = time.monotonic()
    assert c.add_partitions("t", pid, epoch, {("a", 1)}) == E.CONCURRENT_TRANSACTIONS
    assert 0.09 < time.monotonic() - t0 < 2.0
    markers.gate.set()
    wait_complete(c, tsm)
