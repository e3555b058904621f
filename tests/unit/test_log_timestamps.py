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
