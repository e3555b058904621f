import pytest

from eoslab.v1 import common_pb2
from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.producer_state import ProducerStateError, ProducerStateManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def _append(log, psm, pid, epoch, seq, n):
    b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)] * n, producer_id=pid, producer_epoch=epoch,
                                              base_sequence=seq))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)
    return b


def _check(psm, pid, epoch, seq, n=1):
    psm.prepare_update(pid).check(epoch, seq, n)


def test_cache_keeps_the_last_n_batches(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path), retain=3)
    for i in range(5):
        _append(log, psm, 7, 0, i, 1)
    e = psm.last_entry(7)
    assert [b.last_seq for b in e.batch_metadata] == [2, 3, 4]
    assert e.find_duplicate_batch(0, 4, 4).first_offset == 4
    assert e.find_duplicate_batch(0, 1, 1) is None
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 7, 0, 1)
    assert ei.value.code == E.DUPLICATE_SEQUENCE_NUMBER


def test_modern_kafka_answer_for_old_duplicates(tmp_path):
    log = UnifiedLog(str(tmp_path))
    psm = ProducerStateManager(str(tmp_path), retain=2, duplicate_beyond_cache_error=E.OUT_OF_ORDER_SEQUENCE_NUMBER)
    for i in range(3):
        _append(log, psm, 7, 0, i, 1)
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 7, 0, 0)
    assert ei.value.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("epoch,seq,code", [
    (1, 0, E.INVALID_PRODUCER_EPOCH),      # lower epoch
    (3, 1, E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch not at 0
    (2, 9, E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # gap
])
def test_epoch_and_sequence_rules(tmp_path, epoch, seq, code):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    _append(log, psm, 7, 2, 0, 3)
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 7, epoch, seq)
    assert ei.value.code == code


@pytest.mark.parametrize("mode,code", [
    ("OUT_OF_ORDER_SEQUENCE_NUMBER", E.OUT_OF_ORDER_SEQUENCE_NUMBER),   # 0.11
    ("UNKNOWN_PRODUCER_ID", E.UNKNOWN_PRODUCER_ID),                     # 1.0 to 2.4
    ("accept", None),                                                    # KIP-360, 2.5 and later
])
def test_unknown_producer_by_generation(tmp_path, mode, code):
    psm = ProducerStateManager(str(tmp_path), producer_id_known=lambda pid: pid < 100, unknown_producer=mode)
    _check(psm, 5, 0, 0)
    if code is None:
        _check(psm, 5, 0, 3)                        # no state here: any sequence starts the producer
    else:
        with pytest.raises(ProducerStateError) as ei:
            _check(psm, 5, 0, 3)
        assert ei.value.code == code
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 500, 0, 0)                      # an id no controller block ever held
    assert ei.value.code == E.UNKNOWN_PRODUCER_ID


def _marker(log, psm, pid, epoch, committed=True):
    from eoslab.common.control_records import control_record
    key, value = control_record(committed, 0)
    b = StoredBatch.from_proto(rb.build_batch([(key, value, 0)], producer_id=pid, producer_epoch=epoch,
                                              base_sequence=rb.NO_SEQUENCE, transactional=True, control=True))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)


def test_after_a_marker_cleared_the_cache_the_producer_restarts_at_zero(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)] * 3, producer_id=7, producer_epoch=0,
                                              base_sequence=0, transactional=True))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)
    _marker(log, psm, 7, 1)                         # KIP-890 part 2: the marker carries the next epoch
    assert psm.last_entry(7).producer_epoch == 1 and not psm.last_entry(7).batch_metadata
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 7, 1, 3)                        # the old sequences do not go on in the new epoch
    assert ei.value.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    _check(psm, 7, 1, 0)


def test_non_transactional_write_during_an_open_transaction_is_invalid_txn_state(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)], producer_id=7, producer_epoch=0,
                                              base_sequence=0, transactional=True))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)
    with pytest.raises(ProducerStateError) as ei:
        psm.prepare_update(7).check(0, 1, 1, transactional=False)
    assert ei.value.code == E.INVALID_TXN_STATE
    psm.prepare_update(7).check(0, 1, 1, transactional=True)
    _marker(log, psm, 7, 0, committed=False)
    psm.prepare_update(7).check(0, 1, 1, transactional=False)      # closed: a plain write is fine again


def test_verification_guard_is_cleared_by_a_marker(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    g = psm.verification_guard(7)
    assert psm.verification_guard(7) is g and psm.verification_still_valid(7, g)
    _marker(log, psm, 7, 0, committed=False)        # the transaction ended while the leader asked
    assert not psm.verification_still_valid(7, g)


def test_state_rebuilt_from_snapshot_plus_log_and_from_log_alone(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    for i in range(4):
        _append(log, psm, 7, 0, i * 2, 2)
    psm.snapshot()
    for i in range(4, 6):
        _append(log, psm, 7, 0, i * 2, 2)
    _append(log, psm, 8, 0, 0, 1)
    want = {pid: e.to_json() for pid, e in psm.producers.items()}
    again = ProducerStateManager(str(tmp_path))
    again.load(log)
    assert {pid: e.to_json() for pid, e in again.producers.items()} == want
    for f in tmp_path.glob("*.snapshot"):
        f.unlink()
    scratch = ProducerStateManager(str(tmp_path))
    scratch.load(log)
    assert {pid: e.to_json() for pid, e in scratch.producers.items()} == want


def test_corrupt_snapshot_is_ignored(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    _append(log, psm, 7, 0, 0, 1)
    path = psm.snapshot()
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(b"#")
    again = ProducerStateManager(str(tmp_path))
    again.load(log)
    assert again.last_entry(7).last_seq == 0


def test_idle_producers_expire_unless_a_transaction_is_open(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    _append(log, psm, 7, 0, 0, 1)
    b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)], producer_id=8, producer_epoch=0,
                                              base_sequence=0, transactional=True))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)
    assert psm.remove_expired_producers(60000) == []
    assert psm.remove_expired_producers(0) == [7]          # 8 has an open transaction: kept
    assert psm.last_entry(7) is None and psm.last_entry(8) is not None
