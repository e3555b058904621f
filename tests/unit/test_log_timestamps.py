"""UnifiedLog.fetch_offset_by_timestamp: ListOffsets by timestamp and MAX_TIMESTAMP as Kafka's
UnifiedLog.fetchOffsetByTimestamp answers them, across batches and segments and below a bound."""
import pytest

from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog

pytestmark = pytest.mark.fast


def _append(log, stamps, epoch=0):
    sb = StoredBatch.from_proto(rb.build_batch([(None, b"v", ts) for ts in stamps]))
    sb.base_offset, sb.leader_epoch = log.log_end_offset, epoch
    log.append(sb)


@pytest.fixture
def log(tmp_path):
    log = UnifiedLog(str(tmp_path), segment_bytes=120)       # a few batches per segment
    _append(log, [100, 105, 103])          # offsets 0-2
    _append(log, [110, 120], epoch=1)      # offsets 3-4
    _append(log, [90, 130, 125], epoch=2)  # offsets 5-7: out of order, as producers may stamp them
    yield log
    log.close()


def test_the_first_record_at_or_after_a_timestamp(log):
    assert len(log.segments) > 1
    assert log.fetch_offset_by_timestamp(0, 8) == (100, 0, 0)
    assert log.fetch_offset_by_timestamp(104, 8) == (105, 1, 0)     # not 103 at offset 2: first by offset
    assert log.fetch_offset_by_timestamp(111, 8) == (120, 4, 1)
    assert log.fetch_offset_by_timestamp(121, 8) == (130, 6, 2)
    assert log.fetch_offset_by_timestamp(131, 8) is None            # nothing that late


def test_max_timestamp_and_the_fetchable_bound(log):
    assert log.fetch_offset_by_timestamp(-3, 8) == (130, 6, 2)
    assert log.fetch_offset_by_timestamp(-3, 6) == (120, 4, 1)      # offset 6 not yet fetchable
    assert log.fetch_offset_by_timestamp(121, 6) is None
    assert log.fetch_offset_by_timestamp(0, 0) is None


def _stamp_segments(log, mtimes_ms):
    import os
    for seg, ms in zip(log.segments, mtimes_ms):
        os.utime(seg.path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_list_offsets_v0_answers_segment_bases_by_modification_time_newest_first(log):
    """Kafka's legacyFetchOffsetsBefore: each segment's base (the log start for the first) with its file's
    modification time, plus the log end (modified now) while the active segment holds anything."""
    from eoslab.common.time import MockTime
    log.time = MockTime(wall_ms=10_000)
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 5] and log.segments[-1].size > 0
    _stamp_segments(log, [1_000, 2_000])
    assert log.legacy_fetch_offsets_before(-1, 10) == [8, 5, 0]           # from the log end down
    assert log.legacy_fetch_offsets_before(-1, 1) == [8]                  # the log end alone
    assert log.legacy_fetch_offsets_before(-2, 10) == [0]                 # the log start
    assert log.legacy_fetch_offsets_before(1_500, 10) == [0]              # modified at or before 1,500
    assert log.legacy_fetch_offsets_before(2_500, 10) == [5, 0]
    assert log.legacy_fetch_offsets_before(2_500, 1) == [5]               # at most max_num_offsets
    assert log.legacy_fetch_offsets_before(999, 10) == []                 # nothing that old
    assert log.legacy_fetch_offsets_before(20_000, 10) == [8, 5, 0]       # the log end, modified "now"
    assert log.maybe_increment_log_start_offset(1)                          # DeleteRecords moved the start
    assert log.legacy_fetch_offsets_before(-2, 10) == [1]


def test_list_offsets_v0_reads_a_segment_deleted_under_it_as_never_modified(log):
    import os
    _stamp_segments(log, [1_000, 2_000])
    first = log.segments[0].path
    os.rename(first, first + ".deleted")
    try:
        assert log.legacy_fetch_offsets_before(500, 10) == [0]     # its time reads 0: at or before any
    finally:
        os.rename(first + ".deleted", first)
