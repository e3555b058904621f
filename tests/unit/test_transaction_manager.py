"""The producer's TransactionManager in process: the state machine, KIP-360 per release, unresolved sequences."""
import time

import pytest

from eoslab.common.errors import E, KafkaError
from clients.producer.record_accumulator import ProducerBatch
from clients.producer.transaction_manager import VALID_PREVIOUS, InvalidStateTransition, State, TransactionManager
from eoslab import kafka_version as kv

pytestmark = pytest.mark.fast
S = State


def txn_tm(version="4.0") -> TransactionManager:
    tm = TransactionManager(True, "t-1", kv.get(version))
    tm.begin_init()
    tm.complete_init(7, 0)
    return tm


def batch(tm, records=10, partition=0) -> ProducerBatch:
    b = ProducerBatch("t", partition, time.monotonic(), record_count=records)
    tm.assign(b)
    b.ever_sent = True
    return b


def test_every_state_lists_its_valid_previous_states_as_kafka():
    assert set(VALID_PREVIOUS) == set(State)
    assert VALID_PREVIOUS[S.ABORTING_TRANSACTION] == {S.IN_TRANSACTION, S.ABORTABLE_ERROR}
    assert VALID_PREVIOUS[S.READY] == {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}
    assert VALID_PREVIOUS[S.INITIALIZING] == {S.UNINITIALIZED, S.ABORTING_TRANSACTION}
    assert S.FATAL_ERROR not in VALID_PREVIOUS[S.FATAL_ERROR] and len(VALID_PREVIOUS[S.FATAL_ERROR]) == 7


def test_invalid_transition_names_both_states_and_changes_nothing():
    tm = txn_tm()
    with pytest.raises(InvalidStateTransition, match="from READY to COMMITTING_TRANSACTION"):
        tm.transition_to(S.COMMITTING_TRANSACTION)
    assert tm.state is S.READY
    with pytest.raises(ValueError, match="needs the error"):
        tm.transition_to(S.FATAL_ERROR)


def test_state_is_not_writable_from_outside():
    tm = txn_tm()
    with pytest.raises(AttributeError):
        tm.state = S.IN_TRANSACTION
    with pytest.raises(AttributeError):
        tm.fatal_error = KafkaError(E.PRODUCER_FENCED)


def test_commit_and_abort_paths():
    tm = txn_tm()
    tm.begin_transaction()
    assert tm.state is S.IN_TRANSACTION
    tm.begin_commit()
    assert tm.complete_transaction() is False and tm.state is S.READY
    tm.begin_transaction()
    tm.begin_abort()
    assert tm.state is S.ABORTING_TRANSACTION
    assert tm.complete_transaction() is False and tm.state is S.READY
    with pytest.raises(InvalidStateTransition):
        tm.begin_commit()                       # nothing to commit outside a transaction


def test_a_fatal_error_blocks_everything():
    tm = txn_tm()
    tm.begin_transaction()
    fenced = KafkaError(E.PRODUCER_FENCED)
    tm.transition_to_fatal(fenced)
    assert tm.fatal_error is fenced
    for step in (tm.begin_transaction, tm.begin_commit, tm.begin_abort, tm.ensure_in_transaction):
        with pytest.raises(KafkaError) as e:
            step()
        assert e.value is fenced
    with pytest.raises(InvalidStateTransition, match="from FATAL_ERROR to READY"):
        tm.transition_to(S.READY)


@pytest.mark.parametrize("version,bump", [("0.11", False), ("2.5", True), ("4.0", True)])
def test_failed_batch_makes_the_transaction_abortable_and_kip360_bumps_at_abort(version, bump):
    tm = txn_tm(version)
    tm.begin_transaction()
    err = KafkaError(E.REQUEST_TIMED_OUT, "expired")
    tm.transition_to_abortable(err, bump=True)
    assert tm.state is S.ABORTABLE_ERROR and tm.abortable_error is err
    with pytest.raises(KafkaError) as e:
        tm.begin_commit()
    assert e.value.code == E.TRANSACTION_ABORTABLE and tm.state is S.ABORTABLE_ERROR
    tm.begin_abort()
    assert tm.complete_transaction() is bump
    if bump:
        assert tm.state is S.INITIALIZING
        b = batch(tm)                                  # a sequence of the old epoch
        assert b.base_sequence == 0 and tm.next_seq[b.tp] == 10
        tm.complete_epoch_bump(7, 1)
        assert (tm.state, tm.producer_epoch, tm.next_seq, tm.epoch_bump_required) == (S.READY, 1, {}, False)
        tm.begin_transaction()                         # the same producer goes on
    else:
        assert tm.state is S.READY and tm.producer_epoch == 0


def test_abortable_error_while_aborting_is_ignored_and_while_committing_needs_no_bump():
    tm = txn_tm()
    tm.begin_transaction()
    tm.begin_abort()
    tm.transition_to_abortable(KafkaError(E.REQUEST_TIMED_OUT), bump=True)
    assert tm.state is S.ABORTING_TRANSACTION and not tm.epoch_bump_required
    tm.complete_transaction()
    tm.begin_transaction()
    tm.begin_commit()
    tm.transition_to_abortable(KafkaError(E.REQUEST_TIMED_OUT), bump=True)
    assert tm.state is S.ABORTABLE_ERROR and not tm.epoch_bump_required


@pytest.mark.parametrize("version,after", [("0.11", S.FATAL_ERROR), ("2.5", S.ABORTABLE_ERROR)])
def test_invalid_pid_mapping_is_abortable_only_where_the_epoch_can_be_bumped(version, after):
    tm = txn_tm(version)
    tm.begin_transaction()
    tm.abortable_error_if_possible(KafkaError(E.INVALID_PRODUCER_ID_MAPPING))
    assert tm.state is after


def test_idempotent_producer_states():
    tm = TransactionManager(True, "", kv.get("4.0"))
    assert tm.state is S.UNINITIALIZED
    tm.begin_idempotent_init()
    tm.begin_idempotent_init()                        # a retry after a failed InitProducerId
    assert tm.state is S.INITIALIZING
    tm.complete_idempotent_init(3, 0)
    assert tm.state is S.READY and tm.producer_id == 3
    tm.begin_idempotent_init()                        # epoch exhausted: a new id
    assert tm.state is S.INITIALIZING


# -- unresolved sequences (Kafka's TransactionManager.maybeResolveSequences) ----------------------------------
def _expire(tm, b):
    tm.acked(b)                     # the sender failed it: it holds no pending sequence any more
    tm.mark_sequence_unresolved(b)


def test_expired_batch_later_acknowledged_resolves_without_a_bump():
    tm = TransactionManager(True, "", kv.get("4.0"))
    tm.begin_idempotent_init()
    tm.complete_idempotent_init(1, 0)
    a, b = batch(tm), batch(tm)
    _expire(tm, a)
    assert tm.has_unresolved_sequence(a.tp)
    tm.maybe_resolve_sequences(lambda tp: True)       # still in flight: no judgement yet
    assert tm.has_unresolved_sequence(a.tp)
    tm.handle_completed_batch(b)                      # a later batch was written, so the expired one was too
    tm.maybe_resolve_sequences(lambda tp: False)
    assert not tm.unresolved and not tm.bump_pending


def test_late_answer_of_the_expired_batch_itself_resolves_it():
    tm = TransactionManager(True, "", kv.get("4.0"))
    tm.begin_idempotent_init()
    tm.complete_idempotent_init(1, 0)
    a = batch(tm)
    _expire(tm, a)
    tm.handle_completed_batch(a)
    tm.maybe_resolve_sequences(lambda tp: False)
    assert not tm.unresolved and not tm.bump_pending


def test_unresolved_sequence_bumps_the_idempotent_epoch():
    tm = TransactionManager(True, "", kv.get("4.0"))
    tm.begin_idempotent_init()
    tm.complete_idempotent_init(1, 0)
    a = batch(tm)
    _expire(tm, a)
    tm.maybe_resolve_sequences(lambda tp: False)      # never acknowledged
    assert tm.bump_pending and not tm.unresolved
    tm.bump_epoch()
    assert tm.producer_epoch == 1 and batch(tm).base_sequence == 0


@pytest.mark.parametrize("version,after,bump", [("0.11", S.FATAL_ERROR, False), ("2.5", S.ABORTABLE_ERROR, True)])
def test_unresolved_sequence_in_a_transaction(version, after, bump):
    tm = txn_tm(version)
    tm.begin_transaction()
    a = batch(tm)
    _expire(tm, a)
    tm.maybe_resolve_sequences(lambda tp: False)
    assert tm.state is after and tm.epoch_bump_required is bump


def test_a_late_answer_from_an_older_epoch_does_not_count():
    tm = TransactionManager(True, "", kv.get("4.0"))
    tm.begin_idempotent_init()
    tm.complete_idempotent_init(1, 0)
    a = batch(tm)
    tm.bump_epoch()
    batch(tm)
    tm.handle_completed_batch(a)                       # epoch 0's answer
    assert tm.last_acked == {}


@pytest.mark.parametrize("version", ["0.11", "4.0"])
def test_unresolved_sequence_of_an_idempotent_producer_follows_on_out_of_order(version):
    tm = TransactionManager(True, "", kv.get(version))
    tm.begin_idempotent_init()
    tm.complete_idempotent_init(1, 0)
    _expire(tm, batch(tm))
    tm.maybe_resolve_sequences(lambda tp: False)
    if version == "0.11":       # fatal: no epoch bump before KIP-360
        assert tm.state is S.FATAL_ERROR and tm.fatal_error.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    else:
        assert tm.state is S.READY and tm.bump_pending
    assert TransactionManager(True, "", kv.get("4.0"), on_out_of_order="fatal").on_out_of_order == "fatal"


def test_commit_sent_survives_the_error_that_ends_the_commit():
    """A fenced EndTxn(commit) makes the producer fatal, as Kafka; commit_sent still says the commit may have
    gone out, so a caller does not take the transaction for certainly not committed."""
    tm = txn_tm()
    tm.begin_transaction()
    assert not tm.commit_sent
    tm.begin_commit()
    tm.transition_to_fatal(KafkaError(E.PRODUCER_FENCED))
    assert tm.state is S.FATAL_ERROR and tm.commit_sent


def test_unknown_pid_on_end_txn_commit_is_abortable_with_a_bump():
    tm = txn_tm("2.5")
    tm.begin_transaction()
    tm.begin_commit()
    tm.abortable_error_if_possible(KafkaError(E.UNKNOWN_PRODUCER_ID))
    assert tm.state is S.ABORTABLE_ERROR and tm.epoch_bump_required
    tm.begin_abort()
    assert tm.complete_transaction() is True and tm.state is S.INITIALIZING
