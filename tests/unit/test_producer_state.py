import pytest

from eoslab.v1 import common_pb2
from services.broker import record_batch as rb
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


def test_unknown_producer(tmp_path):
    psm = ProducerStateManager(str(tmp_path), producer_id_known=lambda pid: pid < 100)
    _check(psm, 5, 0, 0)
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 5, 0, 3)
    assert ei.value.code == E.UNKNOWN_PRODUCER_ID
    with pytest.raises(ProducerStateError) as ei:
        _check(psm, 500, 0, 0)
    assert ei.value.code == E.UNKNOWN_PRODUCER_ID


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
