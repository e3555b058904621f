"""Batches the log cleaner rebuilds (eoslab.common.record_filter) and what reads them: kept records keep their
offsets, the batch keeps its last offset and its producer's last sequence, an empty batch survives the
segment file, and Kafka's codec reads them as Kafka's cleaner writes them."""
import io

import pytest
from kio.records.readers import read_batch

from eoslab.common import control_records, kafka_records as kr, record_batch as rb, record_filter as rf
from eoslab.v1 import common_pb2
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.log_segment import LogSegment
from services.broker.producer_state import ProducerStateManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def _kafka_batch(n=5, codec=0, base=100, pid=7, seq=40, keys=None):
    lab = rb.build_batch([((keys or [b"k%d" % i for i in range(n)])[i], b"v%d" % i, 1_000 + i) for i in range(n)],
                         producer_id=pid, producer_epoch=2, base_sequence=seq)
    b = rb.recompress(lab, codec)
    b.base_offset, b.partition_leader_epoch = base, 3
    return b


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_kept_records_keep_their_offsets_and_the_batch_its_last_offset_and_sequence(codec):
    orig = _kafka_batch(codec=codec)
    full = rb.records_with_offsets(orig)
    kept = [full[1], full[3]]
    b = rf.filtered_batch(orig, kept)
    assert rb.records_with_offsets(b) == kept
    assert rb.codec_of(b) == codec and b.crc == rb.crc_of(b)
    sb, so = StoredBatch.from_proto(b), StoredBatch.from_proto(orig)
    assert (sb.base_offset, sb.last_offset, sb.last_sequence) == (so.base_offset, so.last_offset, so.last_sequence)
    assert (sb.record_count, sb.max_timestamp, sb.producer_id, sb.producer_epoch) == (2, 1_003, 7, 2)
    assert rb.records_of(b) == [r[1:] for r in kept]


def test_a_cleaned_batch_goes_out_on_kafkas_wire_with_its_gaps_and_horizon():
    orig = _kafka_batch()          # uncompressed: kio does not decompress
    full = rb.records_with_offsets(orig)
    b = rf.filtered_batch(orig, [full[0], full[4]], delete_horizon=9_999)
    assert rf.delete_horizon(b) == 9_999
    assert [r[3] for r in rb.records_with_offsets(b)] == [1_000, 1_004]   # record timestamps unchanged
    data = kr.to_kafka(StoredBatch.from_proto(b).to_proto())
    kb, size = read_batch(data, 0)             # kio checks the CRC-32C and the lengths
    assert size == len(data)
    assert kb.last_offset_delta == 4 and kb.base_offset == 100
    assert kb.attributes & 0x40 and kb.base_timestamp == 9_999
    assert [(r.offset, r.key) for r in kb.records] == [(100, b"k0"), (104, b"k4")]


def test_an_empty_batch_keeps_offsets_and_sequence_and_reads_back_from_a_segment(tmp_path):
    orig = StoredBatch.from_proto(_kafka_batch())
    empty = StoredBatch.from_proto(rf.empty_batch(orig))
    assert (empty.record_count, empty.last_offset, empty.last_sequence) == (0, 104, 44)
    assert rb.records_with_offsets(empty) == [] and empty.valid_crc()
    after = StoredBatch.from_proto(_kafka_batch(base=110))
    path = str(tmp_path / LogSegment.file_name(100))
    seg = LogSegment(path, 100)
    seg.append(empty)
    seg.append(after)
    seg.close()
    for validate in (True, False):          # a validated and a trusted segment read the same
        again = LogSegment(path, 100)
        assert again.recover(100, validate=validate) == (115, 0)
        assert (again.bases, again.lasts) == ([100, 110], [104, 114])
        got, _, _ = again.read_from(106, 1 << 20, 200)     # an offset in the gap: the next batch
        assert [g.base_offset for g in got] == [110]
        again.close()


def test_clients_may_not_send_the_cleaners_bits():
    for bit in (rb.OFFSET_DELTA_FLAG, rb.DELETE_HORIZON_FLAG):
        b = _kafka_batch()
        b.attributes |= bit
        b.crc = rb.crc_of(b)
        err = rb.validate_batch(b, 1 << 20)
        assert err is not None and err.code == E.INVALID_RECORD


def test_a_follower_appends_across_a_gap_and_a_reopened_log_starts_at_its_first_segment(tmp_path):
    log = UnifiedLog(str(tmp_path))
    orig = StoredBatch.from_proto(_kafka_batch(base=0))
    full = rb.records_with_offsets(orig)
    log.append(StoredBatch.from_proto(rf.filtered_batch(orig, [full[4]])))   # only offset 4 kept
    log.append(StoredBatch.from_proto(_kafka_batch(base=9)))                  # 5..8 cleaned away
    assert log.log_end_offset == 14
    with pytest.raises(ValueError):
        log.append(StoredBatch.from_proto(_kafka_batch(base=13)))
    assert [b.base_offset for b in log.read(6)] == [9]
    assert log.fetch_offset_by_timestamp(1_000, 14)[1] == 4     # record 4 has the first timestamp left
    log.close()
    again = UnifiedLog(str(tmp_path))
    assert (again.log_start_offset, again.log_end_offset) == (0, 14)
    again.close()


def test_producer_state_keeps_the_last_sequence_of_an_emptied_batch_and_an_empty_marker_completes_nothing(tmp_path):
    log, psm = UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path))
    orig = StoredBatch.from_proto(_kafka_batch(base=0, seq=40))
    log.append(StoredBatch.from_proto(rf.empty_batch(orig)))
    for b in log.batches():
        psm.update(b)
    psm.prepare_update(7).check(2, 45, 1)          # the sequence after the emptied batch is accepted
    assert psm.last_entry(7).batch_metadata[-1].last_offset == 4
    key, value = control_records.control_record(True, 0)
    marker = rb.batch_from_encoded(rb.encode_records([(key, value, 0)]), 1, 0, producer_id=7, producer_epoch=2,
                                   transactional=True, control=True)
    marker.base_offset = 5
    assert psm.update(StoredBatch.from_proto(rf.empty_batch(marker))) is None
    assert psm.update(StoredBatch.from_proto(marker)) is not None
