"""The log cleaner on a real Partition and its segment files, on a mock clock (after Kafka's LogCleanerTest):
each key keeps its latest record, offsets stay, tombstones live delete.retention.ms, aborted records never
displace committed ones, a producer keeps its place, a partial round resumes, a truncation stops a swap, an
interrupted swap completes on open, and a read already in a replaced segment finishes."""
import os

import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from services.broker.log import UnifiedLog
from services.broker.log_cleaner import DELETED, SWAP, Cleaner, LogCleaner, group_by_size
from services.broker.log_cleaner_manager import (grab_filthiest, log_to_clean, read_cleaner_checkpoint)
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from tests.helpers import wait_for

pytestmark = pytest.mark.fast


def _partition(tmp_path, clock, **cfg):
    config = LogConfig(segment_bytes=cfg.pop("segment_bytes", 400)).apply_topic_configs(
        {"cleanup.policy": "compact", **{k.replace("_", "."): str(v) for k, v in cfg.items()}})
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=config, time=clock)
    p.make_leader(0, [1], [1], 0)
    return p


def _put(p, key, value, ts=1_000, **producer):
    res = p.append_records_to_leader(rb.build_batch([(key, value, ts)], **producer), acks=1)
    assert res.error == 0, res
    return res.base_offset


def _records(p):
    """(offset, key, value) of every record in the log, in order."""
    out = []
    for b in p.log.batches():
        out += [(o, k, v) for o, k, v, *_ in rb.records_with_offsets(b)]
    return out


def _three_keys(tmp_path, clock, **cfg):
    """A compacted partition holding 40 records of three keys over several segments."""
    p = _partition(tmp_path, clock, **cfg)
    for i in range(40):
        _put(p, b"k%d" % (i % 3), b"v%d" % i)
    return p


def _clean(p, clock, cleaner=None):
    return (cleaner or Cleaner(clock)).clean(log_to_clean(p, clock.milliseconds()))


def test_each_key_keeps_its_latest_record_and_every_offset_stays(tmp_path):
    clock = MockTime()
    p = _partition(tmp_path, clock)
    written = [(_put(p, b"k%d" % (i % 4), b"v%d" % i), i) for i in range(40)]
    assert len(p.log.segments) > 3
    end = p.log.log_end_offset
    stats = _clean(p, clock)
    active_base = p.log.segments[-1].base_offset
    assert stats.end_offset == active_base and read_cleaner_checkpoint(p.log.dir) == active_base
    got = _records(p)
    latest = {}
    for off, i in written:
        if off < active_base:
            latest[b"k%d" % (i % 4)] = off
    expected = sorted(set(latest.values()) | {off for off, _ in written if off >= active_base})
    assert [o for o, _, _ in got] == expected
    assert all(v == b"v%d" % o for o, _, v in got)        # offset o was written with value v<o>
    assert p.log.log_end_offset == end and p.log.log_start_offset == 0
    batches = [(b.base_offset, b.last_offset, b.record_count) for b in p.log.batches()]
    p.close()
    assert not [n for n in os.listdir(p.log.dir) if n.endswith(DELETED)], "removed on close"
    again = UnifiedLog(p.log.dir)            # what was swapped in is what a restart reads
    assert [(b.base_offset, b.last_offset, b.record_count) for b in again.batches()] == batches
    assert (again.log_start_offset, again.log_end_offset) == (0, end)
    again.close()


def test_a_tombstone_stays_delete_retention_ms_after_the_round_that_kept_it_then_goes(tmp_path):
    clock = MockTime()
    p = _partition(tmp_path, clock, delete_retention_ms=1000)
    _put(p, b"a", b"1")
    tomb = _put(p, b"a", None)
    for i in range(20):
        _put(p, b"fill%d" % i, b"x" * 20)
    _clean(p, clock)
    assert [(o, v) for o, k, v in _records(p) if k == b"a"] == [(tomb, None)]
    clock.sleep(0.999)
    for i in range(20, 40):
        _put(p, b"fill%d" % i, b"x" * 20)
    _clean(p, clock)
    assert [(o, v) for o, k, v in _records(p) if k == b"a"] == [(tomb, None)], "within the horizon"
    clock.sleep(0.002)
    for i in range(40, 60):
        _put(p, b"fill%d" % i, b"x" * 20)
    _clean(p, clock)
    assert [o for o, k, v in _records(p) if k == b"a"] == []
    p.close()


def test_aborted_records_never_displace_a_committed_one_and_go_while_their_marker_and_index_entry_stay(tmp_path):
    clock = MockTime()
    p = _partition(tmp_path, clock)
    committed = _put(p, b"k", b"committed")
    aborted = _put(p, b"k", b"aborted", producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    assert p.append_txn_marker(9, 0, 0, committed=False).error == 0
    for i in range(30):
        _put(p, b"f%d" % i, b"x" * 20)
    _clean(p, clock)
    ks = [(o, v) for o, k, v in _records(p) if k == b"k"]
    assert ks == [(committed, b"committed")]
    [marker] = [b for b in p.log.batches() if b.is_control]
    assert marker.base_offset == aborted + 1 and marker.record_count == 1
    [empty] = [b for b in p.log.batches() if b.producer_id == 9 and not b.is_control]   # pid 9's last data batch
    assert (empty.base_offset, empty.record_count, empty.last_sequence) == (aborted, 0, 0)
    assert [t.producer_id for t in p.aborted_transactions(0, p.log.log_end_offset)] == [9]
    p.close()


def test_a_producers_last_batch_stays_empty_so_its_next_sequence_and_its_retry_are_known(tmp_path):
    clock = MockTime()
    p = _partition(tmp_path, clock)
    first = _put(p, b"k", b"idempotent", producer_id=7, producer_epoch=0, base_sequence=0)
    _put(p, b"k", b"newer")
    for i in range(30):
        _put(p, b"f%d" % i, b"x" * 20)
    _clean(p, clock)
    [b] = [b for b in p.log.batches() if b.base_offset == first]
    assert (b.record_count, b.last_offset, b.last_sequence) == (0, first, 0)
    retry = p.append_records_to_leader(rb.build_batch([(b"k", b"idempotent", 1_000)], producer_id=7,
                                                      producer_epoch=0, base_sequence=0), acks=1)
    assert retry.duplicate and retry.base_offset == first
    p.close()
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=p.config, time=clock)   # state rebuilt from the log
    p.make_leader(1, [1], [1], 1)
    assert p.producer_state.last_entry(7).batch_metadata[-1].last_seq == 0
    assert _put(p, b"k", b"next", producer_id=7, producer_epoch=0, base_sequence=1) == p.log.log_end_offset - 1
    p.close()


def test_a_full_offset_map_cleans_part_of_the_dirty_section_and_the_next_round_goes_on(tmp_path):
    clock = MockTime()
    p = _partition(tmp_path, clock)
    for i in range(40):
        _put(p, b"k%d" % i, b"v")          # every key distinct: the map fills at 24 bytes a key
    small = Cleaner(clock, dedupe_buffer_size=24 * 10, load_factor=1.0)
    first = _clean(p, clock, small)
    assert 0 < first.end_offset < p.log.segments[-1].base_offset
    assert read_cleaner_checkpoint(p.log.dir) == first.end_offset
    second = _clean(p, clock, small)
    assert second.end_offset > first.end_offset
    assert len(_records(p)) == 40
    p.close()


def test_a_truncation_during_the_round_stops_the_swap(tmp_path):
    clock = MockTime()
    p = _three_keys(tmp_path, clock)
    before = _records(p)
    ltc = log_to_clean(p, clock.milliseconds())
    cleaner = Cleaner(clock)
    real = cleaner.build_offset_map

    def truncate_meanwhile(*a):
        m = real(*a)
        p.truncate_to(p.log.log_end_offset - 1)
        return m
    cleaner.build_offset_map = truncate_meanwhile
    stats = cleaner.clean(ltc)
    assert stats.aborted and stats.groups_swapped == 0
    assert _records(p) == before[:-1]
    assert not [n for n in os.listdir(p.log.dir) if n.endswith((".cleaned", SWAP))]
    p.close()


def test_a_truncation_below_the_cleaner_checkpoint_lowers_it_to_the_active_segment(tmp_path):
    clock = MockTime()
    p = _three_keys(tmp_path, clock)
    _clean(p, clock)
    cleaned_to = read_cleaner_checkpoint(p.log.dir)
    assert cleaned_to > 10
    p.truncate_to(10)           # what is written again at 10 and after has never been cleaned
    assert read_cleaner_checkpoint(p.log.dir) == p.log.segments[-1].base_offset <= 10
    p.close()


def test_an_interrupted_swap_completes_when_the_log_is_opened(tmp_path):
    clock = MockTime()
    p = _three_keys(tmp_path, clock)
    cleaner = Cleaner(clock)
    groups = []

    def crash_after_the_swap_file(part, gen, group, cleaned, due):
        os.rename(cleaned, cleaned[:-len(".cleaned")] + SWAP)       # renamed .swap, then the broker dies
        groups.append(group)
        return False
    cleaner._swap = crash_after_the_swap_file
    cleaner.clean(log_to_clean(p, clock.milliseconds()))
    [group] = groups
    group_end = group[-1].lasts[-1]
    p.close()
    reopened = Partition("t", 0, str(tmp_path), broker_id=1, config=p.config, time=clock)
    assert not [n for n in os.listdir(reopened.log.dir) if n.endswith((SWAP, DELETED))]
    records = _records(reopened)
    assert len([o for o, _, _ in records if o <= group_end]) <= 3          # the cleaned group: one record a key
    assert [o for o, _, _ in records if o > group_end] == list(range(group_end + 1, 40))   # the rest as written
    assert reopened.log.log_end_offset == 40
    reopened.close()


def test_a_read_in_a_replaced_segment_finishes_and_the_files_go_after_the_delay(tmp_path):
    clock = MockTime()
    p = _three_keys(tmp_path, clock, file_delete_delay_ms=5000)
    old_segments = list(p.log.segments)
    _clean(p, clock)
    assert [n for n in os.listdir(p.log.dir) if n.endswith(DELETED)]
    got, _, _ = old_segments[0].read_from(0, 1 << 20, 1 << 20)     # a reader that took the old list
    assert got and got[0].base_offset == 0
    p.log.delete_due_segments(clock.milliseconds() + 4999)
    assert [n for n in os.listdir(p.log.dir) if n.endswith(DELETED)]
    p.log.delete_due_segments(clock.milliseconds() + 5000)
    assert not [n for n in os.listdir(p.log.dir) if n.endswith(DELETED)]
    p.close()


def test_which_log_is_cleaned_first_follows_the_ratio_and_the_compaction_lags(tmp_path):
    clock = MockTime()

    def cleaned_once(name, **cfg):
        p = _partition(tmp_path / name, clock, **cfg)
        for i in range(40):
            _put(p, b"k%d" % i, b"v", ts=clock.milliseconds())      # distinct keys: cleaning keeps them all
        _clean(p, clock)
        for i in range(14):                                          # two more segments, dirty
            _put(p, b"k%d" % i, b"w", ts=clock.milliseconds())
        return p
    lazy = cleaned_once("a", min_cleanable_dirty_ratio=0.9)
    assert 0 < log_to_clean(lazy, clock.milliseconds()).ratio < 0.9
    assert grab_filthiest([lazy], clock.milliseconds()) is None          # below its ratio
    eager = cleaned_once("b", min_cleanable_dirty_ratio=0.1)
    assert grab_filthiest([lazy, eager], clock.milliseconds()).partition is eager
    due = cleaned_once("c", min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=100)
    assert grab_filthiest([lazy, due], clock.milliseconds()) is None
    clock.sleep(0.101)
    assert grab_filthiest([lazy, due], clock.milliseconds()).partition is due   # max.compaction.lag.ms passed
    held = _partition(tmp_path / "d", clock, min_compaction_lag_ms=60000)
    for i in range(20):
        _put(held, b"k", b"v%d" % i, ts=clock.milliseconds())
    assert log_to_clean(held, clock.milliseconds()).cleanable_bytes == 0   # every record younger than the lag
    clock.sleep(60.001)
    assert log_to_clean(held, clock.milliseconds()).cleanable_bytes > 0
    plain = _partition(tmp_path / "e", clock)
    plain.config.compacted = False
    for i in range(20):
        _put(plain, b"k", b"v%d" % i)
    assert grab_filthiest([plain], clock.milliseconds()) is None          # cleanup.policy=delete
    for x in (lazy, eager, due, held, plain):
        x.close()


def test_segments_group_up_to_the_segment_size():
    class S:
        def __init__(self, size):
            self.size = size
    segs = [S(100), S(200), S(100), S(500), S(50)]
    assert [[s.size for s in g] for g in group_by_size(segs, 400)] == [[100, 200, 100], [500], [50]]


def test_the_cleaner_thread_cleans_a_dirty_log_and_waits_its_backoff_otherwise(tmp_path):
    clock = MockTime()
    p = _three_keys(tmp_path, clock)
    cleaner = LogCleaner(lambda: [p], time=clock, backoff_ms=1000)
    cleaner.start()
    wait_for(lambda: clock.waiters() == 1, what="the thread cleaned, then waits for its backoff")
    assert read_cleaner_checkpoint(p.log.dir) == p.log.segments[-1].base_offset
    for i in range(40):
        _put(p, b"k%d" % (i % 3), b"w%d" % i)
    assert clock.waiters() == 1, "nothing cleans before the backoff is over"
    clock.sleep(1.0)
    wait_for(lambda: read_cleaner_checkpoint(p.log.dir) == p.log.segments[-1].base_offset and clock.waiters() == 1,
             what="the second round after the backoff")
    cleaner.shutdown()
    assert not cleaner._thread.is_alive()
    p.close()
