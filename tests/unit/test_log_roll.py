"""Rolling a partition's active segment by time (Kafka's segment.ms, LogSegment.shouldRoll): by the record
timestamps when the segment's first batch has one, by the segment's age on the log's clock when it has
none, only on an append, and never an empty segment; a topic's segment.ms reaches its partitions."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.log_config import LogConfig
from services.broker.partition import Partition

pytestmark = pytest.mark.fast


def _append(log, ts):
    sb = StoredBatch.from_proto(rb.build_batch([(b"k", b"v", ts)]))
    sb.base_offset = log.log_end_offset
    log.append(sb)


def test_a_segment_rolls_once_its_records_span_more_than_segment_ms(tmp_path):
    log = UnifiedLog(str(tmp_path), segment_ms=1000, time=MockTime())
    _append(log, 5_000)
    _append(log, 6_000)                 # exactly segment.ms apart: Kafka rolls only past it
    assert len(log.segments) == 1
    _append(log, 6_001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    _append(log, 6_500)
    assert len(log.segments) == 2, "the new segment counts from its own first batch"
    log.close()


def test_without_record_timestamps_the_segments_age_on_the_logs_clock_decides(tmp_path):
    clock = MockTime()
    log = UnifiedLog(str(tmp_path), segment_ms=1000, time=clock)
    _append(log, -1)
    clock.sleep(1.0)
    _append(log, -1)
    assert len(log.segments) == 1
    clock.sleep(0.001)
    assert len(log.segments) == 1, "nothing rolls without an append"
    _append(log, -1)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_an_empty_active_segment_never_rolls(tmp_path):
    clock = MockTime()
    log = UnifiedLog(str(tmp_path), segment_ms=1, time=clock)
    clock.sleep(10)
    _append(log, 0)
    assert len(log.segments) == 1
    log.close()


def test_a_topics_segment_ms_reaches_its_partition_and_a_config_change_applies(tmp_path):
    clock = MockTime()
    p = Partition("t", 0, str(tmp_path), broker_id=1,
                  config=LogConfig().apply_topic_configs({"segment.ms": "100"}), time=clock)
    assert p.log.segment_ms == 100
    p.update_config(LogConfig().apply_topic_configs({"segment.ms": "50"}))
    assert p.log.segment_ms == 50
    assert LogConfig().segment_ms == 604800000
    p.close()
