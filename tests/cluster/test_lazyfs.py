"""The lazy filesystem on real FUSE mounts: synced bytes survive every fault, unsynced ones are
seen before the fault and gone after, torn writes keep a prefix, corrupt flips exactly the
bytes asked, and the mount behaves like a plain directory otherwise (a differential test).

Every mount lives in a private temporary directory; the fixture's teardown unmounts it and
fails the test if any lazyfs mount is left under it in /proc/mounts. Where FUSE is not
usable here the tests skip with the one-line reason LazyFs.available() gives.
"""
from __future__ import annotations

import os
import random
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from cluster.lazyfs import LazyFs, LazyFsError, LazyFsUnavailable, cleanup_stale, lazyfs_mounts

pytestmark = pytest.mark.integration


def _under(root: str) -> list[str]:
    return [m for m in lazyfs_mounts() if m.startswith(root.rstrip("/") + "/")]


@pytest.fixture
def scratch():
    d = tempfile.mkdtemp(prefix="lazyfs-t-")  # short: the control socket path fits in sun_path
    yield d
    cleanup_stale(d)
    left = _under(d)
    shutil.rmtree(d, ignore_errors=True)
    assert not left, f"stale lazyfs mounts left behind: {left}"


@pytest.fixture
def lazy(scratch):
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)
    fs = LazyFs(os.path.join(scratch, "backing"), os.path.join(scratch, "mnt")).mount()
    yield fs
    fs.unmount()
    assert not fs.mounted


def _write(path: str, data: bytes, offset: int | None = None, fsync: bool = False, mode: str = "r+b") -> None:
    if not os.path.exists(path):
        mode = "wb"
    with open(path, mode) as f:
        if offset is not None:
            f.seek(offset)
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_the_filesystem_never_loses_a_synced_byte(lazy):
    p = os.path.join(lazy.mountpoint, "seg.log")
    synced = random.Random(1).randbytes(10_000)
    _write(p, synced, fsync=True)
    _write(p, b"X" * 3000, offset=8000)         # overwrites synced bytes and extends the file
    _write(p, b"tail" * 100, mode="ab")
    _write(p, b"Y" * 50, offset=20)
    assert _read(p)[:20] == synced[:20] and len(_read(p)) == 11_400
    lost = lazy.lose_unsynced()
    assert lost["/seg.log"]["lost_bytes"] > 0
    assert _read(p) == synced
    assert lazy.status() == {}


def test_fdatasync_and_a_truncate_are_synced_too(lazy):
    p = os.path.join(lazy.mountpoint, "cp")
    _write(p, b"a" * 100, fsync=True)
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 40)
    os.pwrite(fd, b"b" * 10, 40)
    os.fdatasync(fd)
    os.pwrite(fd, b"c" * 10, 0)
    os.ftruncate(fd, 5)
    os.close(fd)
    assert _read(p) == b"c" * 5
    lazy.lose_unsynced()
    assert _read(p) == b"a" * 40 + b"b" * 10


def test_unsynced_writes_are_seen_before_the_fault_and_gone_after(lazy):
    old = os.path.join(lazy.mountpoint, "old")
    new = os.path.join(lazy.mountpoint, "new")
    _write(old, b"durable", fsync=True)
    _write(old, b"+cached", mode="ab")
    _write(new, b"never synced")
    assert _read(old) == b"durable+cached" and os.path.getsize(old) == 14  # another open sees them
    assert _read(new) == b"never synced"
    assert lazy.status() == {"/new": {"unsynced_bytes": 12, "writes": 1, "created": True},
                             "/old": {"unsynced_bytes": 7, "writes": 1, "created": False}}
    lost = lazy.lose_unsynced()
    assert lost == {"/new": {"lost_bytes": 12, "removed": True}, "/old": {"lost_bytes": 7}}
    assert _read(old) == b"durable"
    assert not os.path.exists(new)
    assert sorted(os.listdir(lazy.mountpoint)) == ["old"]


def test_a_created_file_survives_once_it_or_its_directory_is_fsynced(lazy):
    d = os.path.join(lazy.mountpoint, "dir")
    os.mkdir(d)
    _write(os.path.join(d, "fsynced"), b"kept", fsync=True)
    _write(os.path.join(d, "dir-synced"), b"data not synced")
    _write(os.path.join(lazy.mountpoint, "elsewhere"), b"its directory was not fsynced")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    _write(os.path.join(d, "after-dir-sync"), b"gone too")
    lazy.lose_unsynced()
    assert sorted(os.listdir(d)) == ["dir-synced", "fsynced"]
    assert os.listdir(lazy.mountpoint) == ["dir"]
    assert _read(os.path.join(d, "fsynced")) == b"kept"
    assert _read(os.path.join(d, "dir-synced")) == b""  # the entry is durable, its data was not


@pytest.mark.parametrize("ordered", [False, True])
def test_torn_write_keeps_a_seeded_prefix_of_the_last_write(lazy, ordered):
    p = os.path.join(lazy.mountpoint, "seg")
    synced, w1, w2 = b"S" * 100, b"1" * 60, bytes(range(200))
    results = []
    for _ in range(2):  # the same seed tears at the same place
        if os.path.exists(p):
            os.unlink(p)
        _write(p, synced, fsync=True)
        _write(p, w1, mode="ab")
        _write(p, w2, mode="ab")
        got = lazy.torn_write(seed=7, ordered=ordered)["/seg"]
        results.append((got["kept_prefix"], _read(p)))
    (k, content), again = results[0], results[1]
    assert again == (k, content)
    assert 0 <= k < len(w2)
    middle = w1 if ordered else b"\0" * len(w1)
    assert content == (synced + middle + w2[:k] if k or ordered else synced)
    kept = set()
    for seed in range(8):
        _write(p, w2, mode="ab")
        kept.add(lazy.torn_write(seed=seed)["/seg"]["kept_prefix"])
    assert len(kept) > 1, "the prefix length depends on the seed"


def test_corrupt_flips_exactly_the_bytes_asked(lazy):
    p = os.path.join(lazy.mountpoint, "00000000000000000000.index")
    before = random.Random(3).randbytes(4096)
    _write(p, before, fsync=True)
    lazy.corrupt("00000000000000000000.index", 1000, 17, seed=5)
    after = _read(p)
    assert len(after) == len(before)
    assert [i for i in range(len(before)) if before[i] != after[i]] == list(range(1000, 1017))
    with pytest.raises(LazyFsError, match="outside"):
        lazy.corrupt("00000000000000000000.index", 4090, 17, seed=5)
    lazy.lose_unsynced()
    assert _read(p) == after, "a corruption is on the disk, not in the cache"


# ----- differential: the mount against a plain directory, and lose-unsynced against a model -----

_NAMES = ["a", "b"]
_op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(_NAMES), st.integers(0, 60), st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("append"), st.sampled_from(_NAMES), st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("truncate"), st.sampled_from(_NAMES), st.integers(0, 80)),
    st.tuples(st.just("rename"), st.sampled_from(_NAMES), st.sampled_from(_NAMES)),
    st.tuples(st.just("unlink"), st.sampled_from(_NAMES)),
    st.tuples(st.just("fsync"), st.sampled_from(_NAMES)),
)


def _apply(root: str, op: tuple) -> None:
    kind, name = op[0], op[1]
    p = os.path.join(root, name)
    if kind == "rename":
        if os.path.exists(p) and op[2] != name:
            os.rename(p, os.path.join(root, op[2]))
        return
    if kind == "unlink":
        if os.path.exists(p):
            os.unlink(p)
        return
    fd = os.open(p, os.O_RDWR | os.O_CREAT | (os.O_APPEND if kind == "append" else 0), 0o644)
    try:
        if kind == "write":
            os.pwrite(fd, op[3], op[2])
        elif kind == "append":
            os.write(fd, op[2])
        elif kind == "truncate":
            os.ftruncate(fd, op[2])
        elif kind == "fsync":
            os.fsync(fd)
    finally:
        os.close(fd)


def _model_durable(ops: list[tuple]) -> dict[str, bytes]:
    """What lose-unsynced must leave: per name, the content at the file's last fsync; a file
    never fsynced is removed (no directory fsync happens here); renames and unlinks are durable."""
    cur: dict[str, bytearray] = {}
    durable: dict[str, bytes | None] = {}
    for op in ops:
        kind, name = op[0], op[1]
        if kind == "rename":
            if name in cur and op[2] != name:
                cur[op[2]], durable[op[2]] = cur.pop(name), durable.pop(name)
            continue
        if kind == "unlink":
            cur.pop(name, None), durable.pop(name, None)
            continue
        if name not in cur:
            cur[name], durable[name] = bytearray(), None
        buf = cur[name]
        if kind in ("write", "append"):
            off, data = (op[2], op[3]) if kind == "write" else (len(buf), op[2])
            buf.extend(b"\0" * max(0, off - len(buf)))
            buf[off:off + len(data)] = data
        elif kind == "truncate":
            del buf[op[2]:]
            buf.extend(b"\0" * (op[2] - len(buf)))
        elif kind == "fsync":
            durable[name] = bytes(buf)
    return {n: d for n, d in durable.items() if d is not None}


def _contents(root: str) -> dict[str, bytes]:
    return {n: _read(os.path.join(root, n)) for n in sorted(os.listdir(root))}


def test_the_mount_behaves_like_a_directory_and_loses_only_unsynced_data(lazy, scratch):
    plain = os.path.join(scratch, "plain")

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.lists(_op, max_size=25))
    @example([("write", "a", 0, b"synced"), ("fsync", "a"), ("write", "a", 2, b"XY"), ("truncate", "a", 1)])
    @example([("append", "a", b"x" * 30), ("fsync", "a"), ("rename", "a", "b"), ("write", "b", 5, b"y"),
              ("append", "a", b"new"), ("rename", "a", "b")])
    def check(ops):
        for root in (plain, lazy.mountpoint):
            shutil.rmtree(root, ignore_errors=True) if root == plain else [
                os.unlink(os.path.join(root, n)) for n in os.listdir(root)]
        os.makedirs(plain, exist_ok=True)
        assert lazy.status() == {}
        for op in ops:
            _apply(plain, op)
            _apply(lazy.mountpoint, op)
            assert _contents(lazy.mountpoint) == _contents(plain), op
        lazy.lose_unsynced()
        assert _contents(lazy.mountpoint) == _model_durable(ops)
        assert _contents(lazy.backing) == _model_durable(ops)

    check()


@pytest.mark.fast
def test_without_fuse_mount_is_refused_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    reason = LazyFs.available()
    assert reason == "lazyfs: fusermount3 is missing (Debian's fuse3 package)" or "/dev/fuse" in (reason or "")
    fs = LazyFs(str(tmp_path / "b"), str(tmp_path / "m"))
    with pytest.raises(LazyFsUnavailable) as e:
        fs.mount()
    assert str(e.value) == reason and "\n" not in reason
    assert not (tmp_path / "m").exists(), "a refused mount changes nothing"
