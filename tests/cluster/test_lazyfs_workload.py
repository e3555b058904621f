"""The lazy filesystem under real use: the broker's log (services/broker/log.py) written and
reopened on it through each fault, and a mount that outlives a SIGKILLed harness until
`cleanup_stale` removes it.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap

import pytest

from cluster.lazyfs import LazyFs, cleanup_stale, lazyfs_mounts
from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch, UnifiedLog
from tests.cluster.test_lazyfs import lazy, scratch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


def _append(log: UnifiedLog, i: int) -> StoredBatch:
    b = rb.build_batch([(None, b"record-%d-%d" % (i, j), 0) for j in range(3)])
    sb = StoredBatch.from_proto(b)
    sb.base_offset = log.log_end_offset
    log.append(sb)
    return sb


def _fsync_log(d: str) -> None:
    for name in sorted(os.listdir(d)) + ["."]:
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def _records(log: UnifiedLog) -> list[bytes]:
    return [b.records for b in log.batches()]


def test_the_broker_log_recovers_from_each_fault_on_the_lazy_filesystem(lazy):
    d = os.path.join(lazy.mountpoint, "demo-0")
    log = UnifiedLog(d, segment_bytes=1000)
    for i in range(30):
        _append(log, i)
    expect = _records(log)
    log.close()
    log = UnifiedLog(d, segment_bytes=1000)  # reopen: everything is there (page cache)
    assert len(log.segments) > 2 and log.log_end_offset == 90 and _records(log) == expect
    _fsync_log(d)
    for i in range(30, 50):                  # unsynced, rolling at least one new segment
        _append(log, i)
    segments_before = len(log.segments)
    synced = log.recovery_point              # a roll syncs the old segment, as Kafka's roll does
    assert 90 < synced < log.log_end_offset
    expect = _records(log)[:synced // 3]
    log.close()                              # the broker is killed (no clean close), then the power goes

    lazy.lose_unsynced()
    log = UnifiedLog(d, segment_bytes=1000)
    assert log.log_end_offset == synced and _records(log) == expect
    # the active segment's name was made durable by the roll's directory sync; its data was not
    assert len(log.segments) == segments_before and log.segments[-1].size == 0
    assert not log.recovered_bytes_cut

    appended = expect + [_append(log, i).records for i in range(50, 55)]
    log.close()
    torn = lazy.torn_write(seed=4, ordered=True)
    torn_seg = [p for p, r in torn.items() if r.get("kept_prefix")]
    assert len(torn_seg) == 1, torn
    rec = torn[torn_seg[0]]
    log = UnifiedLog(d, segment_bytes=1000)
    assert log.recovered_bytes_cut, "the torn batch is cut on recovery"
    assert os.path.getsize(lazy.mountpoint + torn_seg[0]) == rec["torn_offset"], "cut where the torn write began"
    got = _records(log)
    assert synced <= log.log_end_offset < synced + 15 and got == appended[:len(got)]

    last = log.segments[-1]
    name = os.path.relpath(last.path, lazy.mountpoint)
    end = log.log_end_offset
    log.close()
    lazy.sync_all()
    lazy.corrupt(name, os.path.getsize(last.path) - 2, 1, seed=1)
    log = UnifiedLog(d, segment_bytes=1000)
    assert log.recovered_bytes_cut and log.log_end_offset == end - 3, "the corrupt last batch is cut"
    log.close()


_HARNESS = textwrap.dedent("""
    import sys
    from cluster.lazyfs import LazyFs
    fs = LazyFs(sys.argv[1], sys.argv[2]).mount()
    with open(sys.argv[2] + "/unsynced", "wb") as f:
        f.write(b"written before the harness died")
    print(fs.proc.pid, flush=True)
    sys.stdin.read()
""")


def test_a_mount_outlives_a_sigkilled_harness_and_cleanup_stale_removes_it(scratch):
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)
    backing, mnt = os.path.join(scratch, "b"), os.path.join(scratch, "m")
    harness = subprocess.Popen([sys.executable, "-c", _HARNESS, backing, mnt], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                   os.path.abspath(__file__)))))
    fs_pid = int(harness.stdout.readline())
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    harness.stdin.close()
    harness.stdout.close()
    pidfd = os.pidfd_open(fs_pid)
    try:
        assert mnt in lazyfs_mounts(), "the mount outlives its harness"
        with open(os.path.join(mnt, "unsynced"), "rb") as f:
            assert f.read() == b"written before the harness died"
        assert cleanup_stale(scratch) == [mnt]
        assert mnt not in lazyfs_mounts()
        ready, _, _ = select.select([pidfd], [], [], 30)
        assert ready, "the filesystem process ends once unmounted"
    finally:
        os.close(pidfd)
        cleanup_stale(scratch)
    assert cleanup_stale(scratch) == []


def test_cleanup_stale_also_removes_a_mount_whose_filesystem_process_died(scratch):
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)
    fs = LazyFs(os.path.join(scratch, "b"), os.path.join(scratch, "m")).mount()
    fs.proc.send_signal(signal.SIGKILL)
    fs.proc.wait()
    fs.proc.stdout.close()
    with pytest.raises(OSError):  # ENOTCONN: the kernel still holds the mount
        os.listdir(fs.mountpoint)
    assert fs.mounted
    assert cleanup_stale(scratch) == [fs.mountpoint]
    assert not fs.mounted
