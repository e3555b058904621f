"""The FUSE filesystem (through mfusepy) and its control socket, run by `python -m cluster.lazyfs mount`.

Guarantees: the mount mirrors BACKING (a passthrough of every ordinary file and directory
operation). Writes go through to this process at once (no writeback cache); attributes and
names are never cached by the kernel (zero timeouts), and its page cache of a file is dropped
at every open (no keep_cache), so a fault made underneath is seen by the next open and
stat. A process that keeps a file open across a fault may still read cached pages: the lab
kills the process first, as a power loss would. Data writes, truncates and file creation go through
`LazyState`, which keeps what is needed to drop them until the file's fsync/fdatasync (or
its directory's fsync, for a creation). The control socket answers one JSON request per
line with one JSON line: {"op": "lose-unsynced" | "torn-write" (seed, ordered) |
"sync-all" | "status" | "corrupt" (path, offset, length, seed) | "ping"} ->
{"ok": true, "result": ...} or {"ok": false, "error": "..."}.
A clean unmount keeps everything written (as a clean shutdown would).
"""
from __future__ import annotations

import errno
import json
import logging
import os
import socketserver
import sys
import threading

import mfusepy as fuse

from cluster.lazyfs.state import LazyState

log = logging.getLogger("lazyfs")

_STAT_KEYS = ("st_atime_ns", "st_ctime_ns", "st_gid", "st_mode", "st_mtime_ns", "st_nlink",
              "st_size", "st_uid", "st_ino", "st_blocks", "st_rdev")


def _stat(st: os.stat_result) -> dict:
    d = {k.removesuffix("_ns"): getattr(st, k) for k in _STAT_KEYS}
    d["st_blksize"] = st.st_blksize
    return d


class LazyOps(fuse.Operations):
    use_ns = True

    def __init__(self, state: LazyState, on_ready=None):
        self.state = state
        self.real = state.real
        self.appends: set[int] = set()  # backing fds opened with O_APPEND
        self.on_ready = on_ready

    def init_with_config(self, conn, config):
        # The page cache may serve reads (a new open drops it: no keep_cache), but reads must
        # not each cost a GETATTR round trip: no auto_inval_data (FUSE_CAP_AUTO_INVAL_DATA).
        if conn is not None:
            conn.want &= ~(1 << 12)
        if self.on_ready:
            self.on_ready()

    # ----- metadata: passed through, durable at once -----

    def getattr(self, path, fh=None):
        return _stat(os.fstat(fh) if fh is not None else os.lstat(self.real(path)))

    def access(self, path, amode):
        if not os.access(self.real(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self.real(path))

    def readlink(self, path):
        return os.readlink(self.real(path))

    def mknod(self, path, mode, dev):
        os.mknod(self.real(path), mode, dev)
        return 0

    def mkdir(self, path, mode):
        os.mkdir(self.real(path), mode)
        return 0

    def rmdir(self, path):
        os.rmdir(self.real(path))
        return 0

    def symlink(self, target, source):
        os.symlink(source, self.real(target))
        return 0

    def link(self, target, source):
        os.link(self.real(source), self.real(target))
        return 0

    def unlink(self, path):
        st = os.lstat(self.real(path))
        os.unlink(self.real(path))
        self.state.forget(st)
        return 0

    def rename(self, old, new):
        with self.state.lock:
            try:
                target = os.lstat(self.real(new))
            except FileNotFoundError:
                target = None
            os.rename(self.real(old), self.real(new))
            if target is not None:
                self.state.forget(target)
            self.state.renamed(old, new)
        return 0

    def chmod(self, path, mode):
        os.chmod(self.real(path), mode)
        return 0

    def chown(self, path, uid, gid):
        os.chown(self.real(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path, times=None):
        os.utime(self.real(path), ns=times, follow_symlinks=False)
        return 0

    def statfs(self, path):
        sv = os.statvfs(self.real(path))
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                            "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    # ----- data: through LazyState -----

    def _opened(self, fd: int, path: str, flags: int) -> int:
        if flags & os.O_APPEND:
            self.appends.add(fd)
        if flags & os.O_TRUNC:
            self.state.truncate(fd, path, 0)
        return fd

    @staticmethod
    def _backing_flags(flags: int) -> int:
        """The app's flags for the backing fd: read-write where it writes (undo needs the old
        bytes); append, truncate, create and O_DIRECT are handled here, not by the backing."""
        f = flags & ~(os.O_APPEND | os.O_TRUNC | os.O_CREAT | os.O_EXCL | getattr(os, "O_DIRECT", 0))
        if f & os.O_ACCMODE == os.O_WRONLY:
            f = (f & ~os.O_ACCMODE) | os.O_RDWR
        return f

    def open(self, path, flags):
        return self._opened(os.open(self.real(path), self._backing_flags(flags)), path, flags)

    def create(self, path, mode, flags):
        real = self.real(path)
        existed = os.path.lexists(real)
        fd = os.open(real, self._backing_flags(flags) | os.O_CREAT, mode)
        if not existed:
            self.state.created_file(fd, path)
        return self._opened(fd, path, flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return self.state.write(fh, path, data, offset, append=fh in self.appends)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            self.state.truncate(fh, path, length)
            return 0
        fd = os.open(self.real(path), os.O_RDWR)
        try:
            self.state.truncate(fd, path, length)
        finally:
            os.close(fd)
        return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        self.appends.discard(fh)
        os.close(fh)
        return 0

    def fsync(self, path, datasync, fh):
        self.state.sync(fh, bool(datasync))
        return 0

    def opendir(self, path):
        return 0

    def fsyncdir(self, path, datasync, fh):
        fd = os.open(self.real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.state.sync_dir(path)
        return 0


def handle(state: LazyState, req: dict):
    op = req.get("op")
    if op == "ping":
        return "pong"
    if op == "status":
        return state.status()
    if op == "sync-all":
        return state.sync_all()
    if op == "lose-unsynced":
        return state.lose_unsynced()
    if op == "torn-write":
        return state.torn_write(int(req["seed"]), bool(req.get("ordered", False)))
    if op == "corrupt":
        return state.corrupt(str(req["path"]), int(req["offset"]), int(req["length"]), int(req["seed"]))
    raise ValueError(f"unknown op {op!r}")


def serve_control(state: LazyState, sock_path: str) -> socketserver.BaseServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                try:
                    out = {"ok": True, "result": handle(state, json.loads(line))}
                except Exception as e:  # the caller gets the error, the filesystem goes on
                    out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                self.wfile.write(json.dumps(out).encode() + b"\n")
                self.wfile.flush()

    if os.path.exists(sock_path):
        os.unlink(sock_path)
    server = socketserver.ThreadingUnixStreamServer(sock_path, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lazyfs-control", daemon=True).start()
    return server


def run(backing: str, mountpoint: str, control: str) -> int:
    """Mount in the foreground until unmounted; print `ready` on stdout once live."""
    state = LazyState(backing)
    server = serve_control(state, control)

    def ready():
        sys.stdout.write("ready\n")
        sys.stdout.flush()

    # One request at a time (nothreads): every operation takes LazyState's lock anyway, and on
    # two shared cores the single loop measured faster than libfuse's thread pool.
    opts = dict(foreground=True, nothreads=True, attr_timeout=0, entry_timeout=0, negative_timeout=0,
                fsname="lazyfs", subtype="lazyfs")
    if os.geteuid() == 0:
        opts["allow_other"] = True
    try:
        fuse.FUSE(LazyOps(state, ready), mountpoint, **opts)
    finally:
        server.server_close()  # its thread is a daemon: no shutdown(), which waits out a 0.5 s poll
        try:
            os.unlink(control)
        except FileNotFoundError:
            pass
    return 0
