"""Opening the broker log after an unclean shutdown (Kafka's LogLoader.recoverLog): batches are validated
from the segment holding the recovery point onward, the log is cut at the first torn or corrupt batch,
segments wholly below the recovery point are trusted, and a clean-shutdown marker skips recovery. A crash
is a close without clean=True (nothing synced, no marker)."""
import os

import pytest

from eoslab.common import record_batch as rb
from services.broker.checkpoints import CLEAN_SHUTDOWN_FILE, HW_CHECKPOINT, write_hw_checkpoint
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.producer_state import ProducerStateManager

pytestmark = pytest.mark.fast

TORN = b"\x00\x00\x00\x50torn"      # a frame header promising 80 bytes, then 4


def _append(log, n=2):
    sb = StoredBatch.from_proto(rb.build_batch([(None, b"v%d" % i, 0) for i in range(n)]))
    sb.base_offset = log.log_end_offset
    log.append(sb)
    return sb


def _flip_byte(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(1)
        f.seek(pos)
        f.write(bytes([old[0] ^ 0xFF]))


def _three_segments(d: str) -> UnifiedLog:
    log = UnifiedLog(d, segment_bytes=300)
    while len(log.segments) < 3:
        _append(log)
    for _ in range(3):
        _append(log)
    return log


def test_a_torn_tail_past_the_recovery_point_is_cut_and_the_cut_is_reported(tmp_path):
    d = str(tmp_path)
    log = _three_segments(d)
    log.flush()
    log.checkpoint_recovery_point()
    synced = log.log_end_offset
    for _ in range(2):
        _append(log)                              # unsynced
    active = log.segments[-1].path
    log.close()                                   # the crash
    with open(active, "ab") as f:
        f.write(TORN)
    log = UnifiedLog(d, segment_bytes=300)
    assert log.recovered_bytes_cut and not log.had_clean_shutdown
    assert log.recovery.bytes_cut == len(TORN) and log.recovery.cut_from_offset == synced + 4
    assert log.log_end_offset == synced + 4 and log.recovery_point == synced
    assert log.recovery.segments_validated == 1, "only the segment holding the recovery point"
    assert os.path.getsize(active) == log.segments[-1].size
    _append(log)
    assert [b.base_offset for b in log.batches()] == list(range(0, synced + 6, 2))
    log.close()


def test_a_corrupt_byte_below_the_recovery_point_is_trusted_not_scanned(tmp_path):
    d = str(tmp_path)
    log = _three_segments(d)
    end = log.log_end_offset
    first = log.segments[0]
    last_in_first = first.lasts[-1]
    assert log.recovery_point == log.segments[-1].base_offset   # the rolls flushed segments 0 and 1
    log.checkpoint_recovery_point()
    log.close()                                   # the crash
    _flip_byte(first.path, first.size - 1)        # inside the records of segment 0's last batch
    log = UnifiedLog(d, segment_bytes=300)
    assert not log.recovered_bytes_cut and log.log_end_offset == end
    assert log.segments[0].lasts[-1] == last_in_first
    assert log.recovery.segments_validated == 1
    log.close()
    os.remove(os.path.join(d, "recovery-point-offset-checkpoint"))   # no recovery point: all is scanned
    log = UnifiedLog(d, segment_bytes=300)
    assert log.recovered_bytes_cut and log.log_end_offset == last_in_first - 1
    assert len(log.segments) == 1, "the segments after the cut are deleted"
    log.close()


def test_the_segment_holding_the_recovery_point_is_validated_whole(tmp_path):
    """As Kafka's segments.values(recoveryPoint, MAX): recovery starts at the base of the segment
    holding the recovery point, so a corrupt batch below the recovery point but in that segment is
    cut, and every later segment goes with it."""
    d = str(tmp_path)
    log = UnifiedLog(d, segment_bytes=300)
    while len(log.segments) < 2 or len(log.segments[1].bases) < 2:
        _append(log)
    log.flush()
    log.checkpoint_recovery_point()               # inside segment 1
    middle = log.segments[1]
    while len(log.segments) < 3:
        _append(log)                              # the roll moves the live recovery point, not the checkpoint
    log.close()                                   # the crash
    _flip_byte(middle.path, middle.positions[1] - 1)   # the last byte of segment 1's first batch
    log = UnifiedLog(d, segment_bytes=300)
    assert log.recovered_bytes_cut and log.log_end_offset == middle.base_offset
    assert len(log.segments) == 2 and log.segments[1].size == 0 and log.recovery.segments_deleted == 1
    assert log.recovery.segments_validated == 1
    log.close()


def test_a_clean_shutdown_marker_skips_recovery_and_is_consumed(tmp_path):
    d = str(tmp_path)
    log = UnifiedLog(d)
    for _ in range(4):
        _append(log)
    end = log.log_end_offset
    log.close(clean=True)
    seg = os.path.join(d, "00000000000000000000.log")
    _flip_byte(seg, os.path.getsize(seg) - 1)     # recovery would cut the last batch
    log = UnifiedLog(d)
    assert log.had_clean_shutdown and not log.recovered_bytes_cut
    assert log.log_end_offset == end and log.recovery_point == end
    assert log.recovery.segments_validated == 0
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)), "a crash from now on is unclean"
    _append(log)
    log.close()                                   # the crash
    log = UnifiedLog(d)
    assert not log.had_clean_shutdown and log.recovered_bytes_cut and log.log_end_offset == end - 2
    log.close()


def _crash(p: Partition) -> None:
    p.log.close()
    p.txn_index.close()


def _idempotent(seq: int, value: bytes):
    return rb.build_batch([(None, value, 0)], producer_id=7, producer_epoch=0, base_sequence=seq)


def test_producer_state_after_a_cut_matches_the_log_that_remains(tmp_path):
    """A torn tail past the recovery point is cut while a corrupt batch in a trusted segment stays;
    the producer state is rebuilt from what remains: a snapshot above the cut is not used, and a retry
    of a cut batch is appended again, not answered as a duplicate."""
    d = str(tmp_path)
    cfg = LogConfig(segment_bytes=400, snapshot_interval_batches=3)
    p = Partition("t", 0, d, broker_id=1, config=cfg)
    p.make_leader(0, [1], [1], 0)
    seq = 0
    while len(p.log.segments) < 2 or p.log.log_end_offset < p.log.segments[-1].base_offset + 3:
        assert p.append_records_to_leader(_idempotent(seq, b"r%d" % seq), acks=1).error == 0
        seq += 1
    first = p.log.segments[0]
    assert p.log.recovery_point == p.log.segments[1].base_offset
    p.checkpoint_recovery_point()
    p.checkpoint_hw()
    kept_end = p.log.log_end_offset
    for s in range(seq, seq + 2):                 # unsynced: the crash tears these away
        p.append_records_to_leader(_idempotent(s, b"r%d" % s), acks=1)
    p.producer_state.snapshot()                   # a snapshot above what will remain
    write_hw_checkpoint(os.path.join(p.dir, HW_CHECKPOINT), p.log.log_end_offset)
    active = p.log.segments[-1]
    assert kept_end in active.bases
    torn_at = active.positions[active.bases.index(kept_end)] + 10
    _crash(p)
    with open(active.path, "r+b") as f:
        f.truncate(torn_at)                       # the write of offset kept_end reached the disk torn
    _flip_byte(first.path, first.size - 1)        # a trusted segment's corrupt byte: Kafka does not look

    p = Partition("t", 0, d, broker_id=1, config=cfg)
    assert p.log.recovered_bytes_cut and p.log.log_end_offset == kept_end
    assert p.log.segments[0].size == first.size, "the trusted segment is whole"
    entry = p.producer_state.last_entry(7)
    assert entry.last_seq == kept_end - 1 and entry.batch_metadata[-1].last_offset == kept_end - 1
    os.makedirs(os.path.join(str(tmp_path), "fresh"))
    fresh = ProducerStateManager(os.path.join(str(tmp_path), "fresh"))
    fresh.load(p.log)
    assert entry.to_json() == fresh.last_entry(7).to_json()
    p.make_leader(1, [1], [1], 1)
    retry = p.append_records_to_leader(_idempotent(kept_end, b"r%d" % kept_end), acks=1)
    assert retry.error == 0 and not retry.duplicate and retry.base_offset == kept_end
    p.close()                                     # the broker's shutdown closes it cleanly
    assert os.path.exists(os.path.join(p.dir, CLEAN_SHUTDOWN_FILE))


@pytest.mark.parametrize("content", [b"0\n2\n3 \xed\xa0", b"\xff\xfe\x00garbage", b"0\nnot a count\n"])
def test_a_corrupt_leader_epoch_checkpoint_reads_as_no_epochs_and_the_partition_still_opens(tmp_path, content):
    """A `corrupt` disk fault flips bytes in the checkpoint (a run found a broker whose LeaderAndIsr failed on
    bytes that were not UTF-8): the cache starts empty, as for any malformed checkpoint, and new epochs are
    recorded over it."""
    from services.broker.leader_epoch_cache import LeaderEpochFileCache
    (tmp_path / "leader-epoch-checkpoint").write_bytes(content)
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.latest_epoch == -1
    cache.assign(4, 10)
    assert LeaderEpochFileCache(str(tmp_path)).end_offset_for(4, 12) == (4, 12)
