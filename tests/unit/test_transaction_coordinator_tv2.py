"""The transaction coordinator's EndTxn under transaction.version 2 (KIP-890 part 2), as Kafka's
TransactionCoordinatorTest checks its TV_2 cases: every end bumps the epoch, so a retry comes one epoch
below the current one; the next end at the current epoch is a new request, never a retry; a Prepare*
state answers CONCURRENT_TRANSACTIONS; an abort with no transaction open bumps the epoch with no markers.
The same coordinator reached over the Kafka wire (EndTxn v5) is in tests/kafka_protocol."""
import pytest

from eoslab.common.errors import E
from tests.unit.test_transaction_coordinator import S, coordinator, end, init, wait_complete

pytestmark = pytest.mark.fast


def committed_once(**kw):
    c, tsm, markers = coordinator(epoch_bump_per_txn=True, **kw)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    done = end(c, pid, epoch, tid="t")
    assert (done.error, done.producer_id, done.producer_epoch) == (E.NONE, pid, epoch + 1)
    return c, tsm, markers, pid, epoch


def test_a_retried_commit_is_answered_with_the_bumped_epoch_and_a_second_commit_is_invalid():
    c, tsm, markers, pid, epoch = committed_once()
    wait_complete(c, tsm)
    retry = end(c, pid, epoch)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, epoch + 1)
    # at the new epoch it is the next EndTxn, and there is no transaction to commit (TV1 said NONE here)
    assert end(c, pid, epoch + 1).error == E.INVALID_TXN_STATE
    assert end(c, pid, epoch, commit=False).error == E.INVALID_TXN_STATE   # a retry, but of another end
    assert end(c, pid, epoch - 1).error == E.PRODUCER_FENCED
    assert len(markers.sent) == 1 and markers.sent[0][:3] == (pid, epoch + 1, True)


def test_while_the_markers_are_out_both_epochs_get_concurrent_transactions_whatever_the_end():
    c, tsm, markers = coordinator(epoch_bump_per_txn=True)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    markers.gate.clear()
    assert end(c, pid, epoch).error == E.NONE
    for e, commit in ((epoch, True), (epoch + 1, True), (epoch + 1, False), (epoch, False)):
        assert end(c, pid, e, commit=commit).error == E.CONCURRENT_TRANSACTIONS, (e, commit)
    assert end(c, pid, epoch + 2).error == E.PRODUCER_FENCED
    markers.gate.set()
    wait_complete(c, tsm)


@pytest.mark.parametrize("after", ["init", "commit"])
def test_an_abort_with_no_transaction_open_bumps_the_epoch_and_sends_no_marker(after):
    if after == "init":
        c, tsm, markers = coordinator(epoch_bump_per_txn=True)
        r = init(c)
        pid, epoch = r.producer_id, r.producer_epoch
    else:
        c, tsm, markers, pid, epoch = committed_once()
        wait_complete(c, tsm)
        epoch += 1
    sent = len(markers.sent)
    assert tsm.op.cache["t"].state in (S.EMPTY, S.COMPLETE_COMMIT)
    r = end(c, pid, epoch, commit=False)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 1)
    md = wait_complete(c, tsm)
    assert (md.state, md.producer_epoch, md.last_producer_epoch, md.partitions) == \
        (S.COMPLETE_ABORT, epoch + 1, epoch, set())
    assert [v["state"] for _, v in tsm.records][-2:] == ["PrepareAbort", "CompleteAbort"]
    assert all(not parts for *_, parts in markers.sent[sent:])        # nothing to write a marker to
    assert end(c, pid, epoch, commit=False).producer_epoch == epoch + 1   # its retry: the same answer
    assert end(c, pid, epoch + 1, commit=False).producer_epoch == epoch + 2   # a new abort: again


def test_a_commit_with_no_transaction_open_is_invalid_and_an_old_epoch_is_fenced():
    c, tsm, _ = coordinator(epoch_bump_per_txn=True)
    r = init(c)
    init(c, r.producer_id, r.producer_epoch)                 # KIP-360 bump: epoch 1, last 0
    assert end(c, r.producer_id, 1).error == E.INVALID_TXN_STATE
    assert end(c, r.producer_id, 0, commit=False).error == E.PRODUCER_FENCED    # Empty takes no retry


def test_transaction_version_1_still_answers_a_repeated_commit_none_and_never_bumps():
    c, tsm, _ = coordinator(epoch_bump_per_txn=False)
    r = init(c)
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.add_partitions("t", pid, epoch, {("a", 0)}) == E.NONE
    assert end(c, pid, epoch).error == E.NONE
    wait_complete(c, tsm)
    assert end(c, pid, epoch).error == E.NONE
    assert end(c, pid, epoch, commit=False).error == E.INVALID_TXN_STATE
    assert tsm.op.cache["t"].producer_epoch == epoch
