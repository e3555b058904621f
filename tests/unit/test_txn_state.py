"""TransactionMetadata's state machine, the aborted-transaction index, producer state with markers,
and the coordinator assignment plan."""
import pytest

from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.producer_state import ProducerStateManager
from eoslab.common.control_records import control_record
from services.broker.txn_index import AbortedTxn, TransactionIndex
from services.controller.txn_coordinator_assignment import plan
from services.txn_coordinator.transaction_metadata import (VALID_PREVIOUS_STATES, IllegalTransition,
                                                           TransactionMetadata, TransactionState)

pytestmark = pytest.mark.fast
S = TransactionState
T = 1_767_225_600_000       # the wall-clock time (ms) each transition is stamped with


def md(state=S.EMPTY, epoch=0):
    return TransactionMetadata("t", 7, -1, epoch, -1, 60000, state)


def test_valid_previous_states_are_kafkas():
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    # transaction.version 2 aborts from Empty and Complete* too (an end with no partitions, to bump the epoch)
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                                      S.COMPLETE_ABORT}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert set(VALID_PREVIOUS_STATES) == set(S)


def test_two_phase_transitions():
    m = md()
    t = m.prepare_add_partitions({("a", 0)}, now_ms=T)
    assert m.state == S.EMPTY and m.pending_state == S.ONGOING        # nothing applied before the write
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions({("a", 1)}, now_ms=T)                  # a pending state blocks the next
    m.complete_transition(t)
    assert m.state == S.ONGOING and m.partitions == {("a", 0)} and m.pending_state is None
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, bump_epoch=False, now_ms=T)
    m.abort_transition()                                                # the write failed
    assert m.state == S.ONGOING and m.pending_state is None
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, bump_epoch=False, now_ms=T))
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions({("a", 1)}, now_ms=T)                  # PrepareCommit -> Ongoing is illegal
    m.complete_transition(m.prepare_complete(now_ms=T))
    assert m.state == S.COMPLETE_COMMIT and m.partitions == set() and m.producer_epoch == 0


def test_fence_bumps_epoch_and_aborts_keeping_no_last_epoch():
    m = md(S.ONGOING, epoch=3)
    m.prepare_fence_producer_epoch()
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, bump_epoch=False, fence=True, now_ms=T)
    assert t.producer_epoch == 4 and t.last_producer_epoch == -1      # Kafka: a fence records no last epoch
    m.complete_transition(t)
    assert m.state == S.PREPARE_ABORT and m.producer_epoch == 4


def test_fence_with_kip890_bumps_twice():
    m = md(S.ONGOING, epoch=3)
    m.prepare_fence_producer_epoch()
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, bump_epoch=True, fence=True, now_ms=T)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)


def test_plain_init_records_no_last_epoch_so_an_old_epoch_is_fenced():
    from services.txn_coordinator.transaction_metadata import ProducerFenced
    m = md(S.EMPTY, epoch=0)
    m.complete_transition(m.prepare_increment_producer_epoch(60000, None, now_ms=T))   # a second plain init
    assert (m.producer_epoch, m.last_producer_epoch) == (1, -1)
    with pytest.raises(ProducerFenced):
        m.prepare_increment_producer_epoch(60000, None, expected_epoch=0, now_ms=T)  # the zombie's epoch
    m.complete_transition(m.prepare_increment_producer_epoch(60000, None, expected_epoch=1, now_ms=T))  # KIP-360
    assert (m.producer_epoch, m.last_producer_epoch) == (2, 1)
    t = m.prepare_increment_producer_epoch(60000, None, expected_epoch=1, now_ms=T)  # its retry
    assert (t.producer_epoch, t.last_producer_epoch) == (2, 1)


def test_kip890_rotation_happens_at_complete_with_the_id_chosen_at_prepare():
    m = md(S.ONGOING, epoch=rb.MAX_PRODUCER_EPOCH - 1)
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, bump_epoch=True, next_producer_id=99,
                                                    now_ms=T))
    assert (m.producer_id, m.producer_epoch) == (7, rb.MAX_PRODUCER_EPOCH)     # markers go out with these
    assert m.next_pid_and_epoch() == (99, 0)                                   # what EndTxn answers
    m.complete_transition(m.prepare_complete(now_ms=T))
    assert (m.producer_id, m.producer_epoch, m.last_producer_id, m.next_producer_id) == (99, 0, 7, -1)


def test_epoch_exhaustion_gives_a_new_producer_id():
    m = md(S.COMPLETE_ABORT, epoch=rb.MAX_PRODUCER_EPOCH - 1)
    assert m.epoch_exhausted
    m.complete_transition(m.prepare_increment_producer_epoch(60000, new_producer_id=99, now_ms=T))
    assert (m.producer_id, m.producer_epoch, m.last_producer_id, m.last_producer_epoch) == (99, 0, 7, -1)


def test_transaction_index_collect_truncate_reopen(tmp_path):
    ix = TransactionIndex(str(tmp_path))
    ix.append(AbortedTxn(1, 0, 5, 0))
    ix.append(AbortedTxn(2, 3, 9, 0))
    ix.append(AbortedTxn(2, 3, 9, 0))          # replayed marker: not added twice
    assert [e.producer_id for e in ix.collect(0, 100)] == [1, 2]
    assert [e.producer_id for e in ix.collect(6, 100)] == [2]
    assert ix.collect(0, 3) == [AbortedTxn(1, 0, 5, 0)]
    ix.truncate_to(9)
    ix.close()
    again = TransactionIndex(str(tmp_path))
    assert again.entries == [AbortedTxn(1, 0, 5, 0)]


def _data(off, pid, epoch, seq, n, txn=True):
    b = rb.build_batch([(None, b"v", 0)] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=txn)
    return StoredBatch(off, 0, b.crc, b.attributes, pid, epoch, seq, n, b.max_timestamp, b.records)


def _marker(off, pid, epoch, committed, coordinator_epoch=0):
    data = rb.encode_records([(*control_record(committed, coordinator_epoch), 0)])
    attrs = rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG
    return StoredBatch(off, 0, rb.batch_crc(attrs, pid, epoch, -1, 1, 0, data), attrs, pid, epoch, -1, 1, 0, data)


def test_producer_state_tracks_transactions_and_rebuilds_them(tmp_path):
    log = UnifiedLog(str(tmp_path))
    ix = TransactionIndex(str(tmp_path))
    psm = ProducerStateManager(str(tmp_path), txn_index_=ix)
    for b in (_data(0, 1, 0, 0, 3), _data(3, 2, 0, 0, 2), _marker(5, 1, 1, committed=False, coordinator_epoch=4),
              _data(6, 2, 0, 2, 1)):
        log.append(b)
        psm.update(b)
    assert psm.ongoing_txn_first_offsets() == [3]
    e1 = psm.last_entry(1)
    assert e1.current_txn_first_offset is None and e1.producer_epoch == 1 and e1.coordinator_epoch == 4
    assert ix.entries == [AbortedTxn(1, 0, 5, 3)]
    psm.snapshot()
    log.append(_marker(7, 2, 0, committed=True))
    rebuilt = ProducerStateManager(str(tmp_path), txn_index_=ix)
    rebuilt.load(log)
    assert rebuilt.ongoing_txn_first_offsets() == []
    assert rebuilt.last_entry(1).producer_epoch == 1 and len(ix.entries) == 1
    log.close()
    ix.close()


def test_assignment_plan_is_sticky_balanced_and_bumps_epochs():
    live = {1: {"session": 10, "host": "h1", "port": 1}, 2: {"session": 20, "host": "h2", "port": 2}}
    first = plan(4, {}, {1: live[1]})
    assert {a["coordinator"] for a in first.values()} == {1} and {a["epoch"] for a in first.values()} == {1}
    second = plan(4, first, live)
    assert sorted(a["coordinator"] for a in second.values()) == [1, 1, 2, 2]
    moved = [p for p in second if second[p]["coordinator"] == 2]
    assert all(second[p]["epoch"] == 2 for p in moved)
    assert plan(4, second, live) == second
    gone = plan(4, second, {2: live[2]})
    assert {a["coordinator"] for a in gone.values()} == {2}
    assert all(gone[p]["epoch"] == second[p]["epoch"] + 1 for p in gone if second[p]["coordinator"] == 1)
    restarted = plan(4, gone, {2: dict(live[2], session=21)})   # same id, new session: new epochs
    assert all(restarted[p]["epoch"] == gone[p]["epoch"] + 1 for p in restarted)
