"""DeleteRecords on one partition (services/broker/record_deletion.py and UnifiedLog's log start
offset), in process on a mock clock: the leader's rules, the low watermark its followers hold down,
a follower taking the leader's log start offset, one starting over past its end, and the log start
offset surviving a reopen."""
import os

import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.log import UnifiedLog
from services.broker.log_config import LogConfig
from services.broker.partition import Partition

pytestmark = pytest.mark.fast


def _partition(path, broker_id=1, segment_bytes=1 << 20):
    return Partition("t", 0, str(path), broker_id=broker_id, config=LogConfig(segment_bytes=segment_bytes),
                     time=MockTime())


@pytest.fixture
def leader(tmp_path):
    """Broker 1 leads t-0 alone (its high watermark follows its log end) with 10 records."""
    p = _partition(tmp_path / "leader", segment_bytes=200)
    p.make_leader(0, [1], [1], 0)
    for i in range(10):
        assert p.append_records_to_leader(rb.build_batch([(b"k", b"v%d" % i, 0)]), acks=1).error == E.NONE
    yield p
    p.close()


def test_records_before_the_offset_are_gone_for_readers_and_segments_below_are_deleted(leader):
    segments = len(leader.log.segments)
    assert segments > 2 and leader.high_watermark == 10
    assert leader.delete_records_on_leader(6, {})[:2] == (E.NONE, 6)
    assert leader.log.log_start_offset == 6
    assert leader.read(5, 1 << 20)[0] == E.OFFSET_OUT_OF_RANGE
    err, batches = leader.read(6, 1 << 20)
    assert err == E.NONE and batches[0].base_offset == 6
    assert len(leader.log.segments) < segments and leader.log.segments[0].base_offset <= 6
    assert all(os.path.exists(s.path) for s in leader.log.segments)
    assert leader.delete_records_on_leader(3, {})[:2] == (E.NONE, 3)      # never moves down
    assert leader.log.log_start_offset == 6 and leader.low_watermark({1}) == 6


def test_minus_one_is_the_high_watermark_and_beyond_it_is_out_of_range(leader):
    assert leader.delete_records_on_leader(11, {})[0] == E.OFFSET_OUT_OF_RANGE
    assert leader.delete_records_on_leader(-2, {})[0] == E.OFFSET_OUT_OF_RANGE
    assert leader.log.log_start_offset == 0
    assert leader.delete_records_on_leader(-1, {})[:2] == (E.NONE, 10)
    assert leader.log.log_start_offset == 10 and leader.read(10, 1 << 20) == (E.NONE, [])


def test_a_compact_only_topic_refuses_and_a_follower_is_not_leader(leader, tmp_path):
    assert leader.delete_records_on_leader(5, {"cleanup.policy": "compact"})[0] == E.POLICY_VIOLATION
    assert leader.delete_records_on_leader(5, {"cleanup.policy": "compact,delete"})[0] == E.NONE
    f = _partition(tmp_path / "f", broker_id=2)
    f.make_follower(1, 0, [1, 2], [1, 2], 0)
    assert f.delete_records_on_leader(0, {})[0] == E.NOT_LEADER_OR_FOLLOWER
    f.close()


def test_the_low_watermark_waits_for_live_followers(tmp_path):
    p = _partition(tmp_path / "l")
    p.make_leader(0, [1, 2, 3], [1, 2, 3], 0)
    for i in range(4):
        p.append_records_to_leader(rb.build_batch([(b"k", b"v", 0)]), acks=1)
    p.record_follower_fetch(2, 4, 0)
    p.record_follower_fetch(3, 4, 0)
    assert p.high_watermark == 4
    assert p.delete_records_on_leader(3, {})[0] == E.NONE
    assert p.low_watermark({1, 2, 3}) == 0                 # the followers have not taken it yet
    assert p.await_low_watermark(3, lambda: {1, 2, 3}, 0.01) == 0
    p.record_follower_fetch(2, 4, 3)
    assert p.low_watermark({1, 2, 3}) == 0 and p.low_watermark({1, 2}) == 3     # 3 is not live: not counted
    p.record_follower_fetch(3, 4, 3)
    assert p.await_low_watermark(3, lambda: {1, 2, 3}, 0.01) == 3
    p.close()


def test_a_follower_takes_the_leaders_log_start_offset_up_to_its_own_end(tmp_path, leader):
    f = _partition(tmp_path / "f", broker_id=2)
    f.make_follower(1, 0, [1, 2], [1, 2], 0)
    f.append_as_follower([b.to_proto() for b in leader.log.read(0, 1 << 20, max_offset=4)], 4)
    f.follow_log_start_offset(7)
    assert f.log.log_start_offset == 4                      # not past its own log end
    f.truncate_fully_and_start_at(7)                        # the leader's log starts past this one's end
    assert (f.log.log_start_offset, f.log_end_offset, f.high_watermark) == (7, 7, 7)
    f.append_as_follower([b.to_proto() for b in leader.log.read(7, 1 << 20)], 10)
    assert f.log_end_offset == 10 and f.read(7, 1 << 20, replica=True)[1][0].base_offset == 7
    f.close()


def test_the_log_start_offset_survives_a_reopen(tmp_path):
    d = str(tmp_path / "log")
    log = UnifiedLog(d, segment_bytes=1 << 20)
    for i in range(5):
        log.append(_stored(i))
    assert log.maybe_increment_log_start_offset(3)
    log.close()                                             # unclean: nothing flushed
    again = UnifiedLog(d, segment_bytes=1 << 20)
    assert again.log_start_offset == 3 and again.log_end_offset == 5
    again.close()


def _stored(offset):
    from services.broker.log_segment import StoredBatch
    b = rb.build_batch([(b"k", b"v", 0)])
    b.base_offset = offset
    return StoredBatch.from_proto(b)
