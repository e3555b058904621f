import os

import pytest

from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog

pytestmark = pytest.mark.fast


def _append(log, n, pid=-1, seq=-1):
    b = rb.build_batch([(None, b"v%d" % i, 0) for i in range(n)], producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    sb = StoredBatch.from_proto(b)
    sb.base_offset = log.log_end_offset
    log.append(sb)
    return sb


def test_log_survives_reopen_and_reads_by_offset(tmp_path):
    log = UnifiedLog(str(tmp_path), segment_bytes=200)
    for _ in range(10):
        _append(log, 3)
    log.close()
    log = UnifiedLog(str(tmp_path), segment_bytes=200)
    assert log.log_end_offset == 30
    assert len(log.segments) > 1
    got = log.read(13, 1 << 20)
    assert got[0].base_offset == 12 and got[-1].last_offset == 29


def test_torn_and_corrupt_tails_are_cut(tmp_path):
    log = UnifiedLog(str(tmp_path))
    _append(log, 2)
    last = _append(log, 2)
    log.close()
    seg = os.path.join(str(tmp_path), "00000000000000000000.log")
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:   # flip a byte inside the last batch's records
        f.seek(size - 1)
        f.write(b"\x00")
    with open(seg, "ab") as f:    # and leave a torn frame after it
        f.write(b"\x00\x00\x00\x50abc")
    log = UnifiedLog(str(tmp_path))
    assert log.recovered_bytes_cut
    assert log.log_end_offset == last.base_offset  # the corrupt batch and the torn frame are gone
    _append(log, 1)
    assert log.log_end_offset == 3


def test_truncate_to_drops_whole_batches(tmp_path):
    log = UnifiedLog(str(tmp_path), segment_bytes=150)
    for _ in range(6):
        _append(log, 2)
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert [b.base_offset for b in log.batches()] == [0, 2, 4]


def test_closing_a_log_twice_leaves_other_files_alone(tmp_path):
    """A second close of a log must not close the descriptor number its segment used, which by then
    may be another file's (in the broker, a socket; in a test worker, its control pipe)."""
    log = UnifiedLog(str(tmp_path))
    _append(log, 2)
    seg = log.segments[0]
    number = seg._rfd
    log.close()
    r, w = os.pipe()
    os.dup2(r, number)              # the kernel hands the number out again
    try:
        log.close()
        os.fstat(number)            # still open
    finally:
        for fd in {r, w, number}:
            try:
                os.close(fd)
            except OSError:
                pass


def test_a_read_that_fills_up_inside_a_segment_skips_nothing(tmp_path):
    """A read whose byte budget runs out partway through a segment that is not the last one stops
    there; it must not go on with the next segment and leave a hole in the offsets it returns."""
    log = UnifiedLog(str(tmp_path), segment_bytes=1000)
    for _ in range(60):
        _append(log, 3)
    assert len(log.segments) > 3
    for start in range(0, log.log_end_offset, 7):
        for budget in (1, 150, 500, 1500, 5000):
            got = log.read(start, budget)
            offsets = [b.base_offset for b in got]
            assert offsets and offsets[0] <= start <= got[0].last_offset
            assert all(a.last_offset + 1 == b.base_offset for a, b in zip(got, got[1:])), (start, budget, offsets)
    assert [b.base_offset for b in log.batches()] == list(range(0, 180, 3))
