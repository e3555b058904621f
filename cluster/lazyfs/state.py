"""The lazy part of the lazy filesystem: what was written since each file's last fsync.

Guarantees: every write, truncate and create made through `LazyState` is applied to the
backing file at once (so any reader sees it: page-cache semantics), and enough is kept in
memory to take it back: for each file, in order, an undo record per operation since the
file's last fsync/fdatasync (the offset, the bytes it overwrote, the size before). Then:

- `sync(...)` (fsync/fdatasync of the file, or `sync_all`) makes the file's writes durable:
  the backing file is fsynced and the undo records are dropped. A synced byte is never
  touched again by a fault other than `corrupt`.
- `lose_unsynced()` rolls every file back, newest record first, to its content at its last
  sync, and removes files created since neither they nor their directory were fsynced.
- `torn_write(seed)` does the same but then writes back a seeded prefix (0 to len-1 bytes)
  of each file's last unsynced write; with `ordered=True` only that last write is torn
  and the earlier unsynced writes stay, as an in-order writeback cut mid-write.
- `corrupt(path, offset, length, seed)` XORs each byte of the range with a nonzero seeded
  value: exactly those bytes change. It acts on the content as readers see it now (run it
  after `lose_unsynced` or `sync_all` to corrupt durable bytes).

Renames, unlinks, mkdir/rmdir and chmod are durable at once (not undone by a fault); a
file's data that was unsynced when it was unlinked is gone with it. Files are tracked by
their backing inode, so a rename keeps a file's undo records with it.
"""
from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Undo:
    offset: int        # where the operation wrote (for a truncate: the new length)
    old: bytes         # the bytes it overwrote, all within old_size
    old_size: int      # the file's size before it
    new_len: int       # bytes written (0 for a truncate)


@dataclass(slots=True)
class FileState:
    path: str                     # current path relative to the backing root, "/a/b"
    undo: list[_Undo] = field(default_factory=list)
    created: bool = False         # created and neither it nor its directory fsynced since

    def unsynced_bytes(self) -> int:
        return sum(max(u.new_len, len(u.old)) for u in self.undo)


class LazyState:
    """Undo records per backing file, behind one lock; paths are relative to `root`."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.lock = threading.RLock()
        self.files: dict[tuple[int, int], FileState] = {}

    def real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, int]:
        return (st.st_dev, st.st_ino)

    def _state(self, fd: int, path: str) -> FileState:
        key = self._key(os.fstat(fd))
        st = self.files.get(key)
        if st is None:
            st = self.files[key] = FileState(path)
        elif path:
            st.path = path
        return st

    # ----- operations from the filesystem -----

    def created_file(self, fd: int, path: str) -> None:
        with self.lock:
            self._state(fd, path).created = True

    def write(self, fd: int, path: str, data: bytes, offset: int, append: bool = False) -> int:
        with self.lock:
            size = os.fstat(fd).st_size
            if append:
                offset = size
            old = os.pread(fd, min(len(data), max(0, size - offset)), offset) if offset < size else b""
            n = os.pwrite(fd, data, offset)
            self._state(fd, path).undo.append(_Undo(offset, old, size, n))
            return n

    def truncate(self, fd: int, path: str, length: int) -> None:
        with self.lock:
            size = os.fstat(fd).st_size
            if length == size:
                return
            old = os.pread(fd, size - length, length) if length < size else b""
            os.ftruncate(fd, length)
            self._state(fd, path).undo.append(_Undo(length, old, size, 0))

    def sync(self, fd: int, datasync: bool = False) -> None:
        """fsync/fdatasync of a file: what was written before the call is durable after it.
        The backing fsync runs outside the lock; writes made meanwhile stay unsynced."""
        key = self._key(os.fstat(fd))
        with self.lock:
            st = self.files.get(key)
            n = len(st.undo) if st is not None else 0
        (os.fdatasync if datasync else os.fsync)(fd)
        with self.lock:
            if st is not None and self.files.get(key) is st:
                del st.undo[:n]
                st.created = False  # a file's fsync makes its new directory entry durable, as on ext4
                if not st.undo:
                    del self.files[key]

    def sync_dir(self, dirpath: str) -> None:
        """fsync of a directory: the files created in it are no longer undone."""
        with self.lock:
            d = "/" + dirpath.strip("/")
            for st in self.files.values():
                if st.created and os.path.dirname(st.path) == d:
                    st.created = False

    def renamed(self, old: str, new: str) -> None:
        with self.lock:
            for st in self.files.values():
                if st.path == old:
                    st.path = new
                elif st.path.startswith(old.rstrip("/") + "/"):
                    st.path = new.rstrip("/") + st.path[len(old.rstrip("/")):]

    def forget(self, st_result: os.stat_result) -> None:
        """The file's last name was unlinked: its unsynced data goes with it."""
        with self.lock:
            if st_result.st_nlink <= 1:
                self.files.pop(self._key(st_result), None)

    # ----- faults and control -----

    def _open(self, st: FileState, key: tuple[int, int]) -> int | None:
        try:
            fd = os.open(self.real(st.path), os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return None
        if self._key(os.fstat(fd)) != key:
            os.close(fd)
            return None
        return fd

    @staticmethod
    def _rollback(fd: int, records: list[_Undo]) -> None:
        for u in reversed(records):
            os.ftruncate(fd, u.old_size)
            if u.old:
                os.pwrite(fd, u.old, u.offset)

    def _drop(self, seed: int | None, ordered: bool) -> dict[str, dict]:
        out: dict[str, dict] = {}
        with self.lock:
            for key, st in sorted(self.files.items(), key=lambda kv: kv[1].path):
                fd = self._open(st, key)
                if fd is None:
                    continue
                try:
                    lost = st.unsynced_bytes()
                    if st.created:
                        self._rollback(fd, st.undo)
                        os.unlink(self.real(st.path))
                        out[st.path] = {"lost_bytes": lost, "removed": True}
                        continue
                    last = st.undo[-1] if st.undo else None
                    keep = b""
                    if seed is not None and last is not None and last.new_len > 0:
                        data = os.pread(fd, last.new_len, last.offset)
                        rng = random.Random(f"{seed}:{st.path}")
                        keep = data[:rng.randrange(len(data))]
                    self._rollback(fd, st.undo[-1:] if ordered and last is not None else st.undo)
                    if keep:
                        os.pwrite(fd, keep, last.offset)
                    os.fsync(fd)
                    rec = {"lost_bytes": lost}
                    if seed is not None and last is not None:
                        rec["torn_offset"], rec["kept_prefix"] = last.offset, len(keep)
                    out[st.path] = rec
                finally:
                    os.close(fd)
            self.files.clear()
        return out

    def lose_unsynced(self) -> dict[str, dict]:
        """Power loss: every file back to its last synced content."""
        return self._drop(None, False)

    def torn_write(self, seed: int, ordered: bool = False) -> dict[str, dict]:
        """Power loss mid-write: synced content (plus, if `ordered`, the earlier unsynced
        writes) and a seeded prefix of each file's last unsynced write."""
        return self._drop(seed, ordered)

    def sync_all(self) -> dict[str, dict]:
        out = {}
        with self.lock:
            for key, st in sorted(self.files.items(), key=lambda kv: kv[1].path):
                fd = self._open(st, key)
                if fd is not None:
                    os.fsync(fd)
                    os.close(fd)
                out[st.path] = {"synced_bytes": st.unsynced_bytes()}
            self.files.clear()
        return out

    def status(self) -> dict[str, dict]:
        with self.lock:
            return {st.path: {"unsynced_bytes": st.unsynced_bytes(), "writes": len(st.undo),
                              "created": st.created}
                    for st in sorted(self.files.values(), key=lambda s: s.path)}

    def corrupt(self, path: str, offset: int, length: int, seed: int) -> dict:
        """XOR each byte of [offset, offset+length) with a nonzero seeded value."""
        rng = random.Random(f"{seed}:{path}:{offset}:{length}")
        with self.lock:
            fd = os.open(self.real(path), os.O_RDWR | os.O_NOFOLLOW)
            try:
                size = os.fstat(fd).st_size
                if offset < 0 or length < 0 or offset + length > size:
                    raise ValueError(f"{path}: range {offset}+{length} is outside the file's {size} bytes")
                old = os.pread(fd, length, offset)
                new = bytes(b ^ rng.randrange(1, 256) for b in old)
                os.pwrite(fd, new, offset)
                os.fsync(fd)
            finally:
                os.close(fd)
        return {"path": path, "offset": offset, "length": length}
