"""The Python API of the lazy filesystem: mount, fault, unmount, clean up.

Guarantees:
- `LazyFs.available()` is None where a lazy filesystem can be mounted, else one line saying
  why not (no FUSE device: /dev/fuse, or $EOSLAB_FUSE_DEVICE where set; no fusermount3, no
  libfuse3, no mfusepy); `mount()` raises
  `LazyFsUnavailable` with that line, and changes nothing.
- `mount()` returns only once the filesystem is live: the mount process has said `ready`
  from FUSE's init and the mount point is in /proc/mounts as `fuse.lazyfs`. It raises
  `LazyFsError` (with the process's last stderr lines) if the process exits first or the
  timeout passes; it never sleeps.
- The mount process is in a session of its own, so it outlives a SIGKILL of the caller;
  `cleanup_stale(root)` then unmounts every lazyfs mount under root (`fusermount3 -u`,
  lazily with `-uz` when busy), which ends its process.
- `unmount()` unmounts the same way and waits for the process it started to exit.
- Faults (`lose_unsynced`, `torn_write`, `corrupt`, `sync_all`, `status`) go to the mount
  process over its Unix control socket and return its JSON result; an error there, or a
  process that dies while it is asked, raises `LazyFsError`.
"""
from __future__ import annotations

import ctypes.util
import hashlib
import importlib.util
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import time

FSTYPE = "fuse.lazyfs"
FUSE_DEVICE_ENV = "EOSLAB_FUSE_DEVICE"      # the FUSE device to use (default /dev/fuse)


def fuse_device() -> str:
    """The FUSE device: $EOSLAB_FUSE_DEVICE, else /dev/fuse."""
    return os.environ.get(FUSE_DEVICE_ENV) or "/dev/fuse"


class LazyFsError(RuntimeError):
    pass


class LazyFsUnavailable(LazyFsError):
    pass


def _unescape(field: str) -> str:
    """/proc/mounts escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def lazyfs_mounts() -> list[str]:
    """Mount points of every lazyfs mount on this machine, from /proc/mounts."""
    out = []
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == FSTYPE:
                out.append(_unescape(parts[1]))
    return out


def _fusermount_unmount(mountpoint: str) -> None:
    r = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True)
    if r.returncode != 0 and mountpoint in lazyfs_mounts():
        r = subprocess.run(["fusermount3", "-uz", mountpoint], capture_output=True, text=True)
        if r.returncode != 0 and mountpoint in lazyfs_mounts():
            raise LazyFsError(f"fusermount3 could not unmount {mountpoint}: {r.stderr.strip()}")


def cleanup_stale(root: str) -> list[str]:
    """Unmount every lazyfs mount at or under `root` (left by a killed harness); returns them."""
    root = os.path.abspath(root)
    stale = [m for m in lazyfs_mounts() if m == root or m.startswith(root.rstrip("/") + "/")]
    for m in sorted(stale, key=len, reverse=True):
        _fusermount_unmount(m)
    return stale


def request(sock_path: str, req: dict, timeout: float = 60.0):
    """One request on a control socket; returns its result or raises LazyFsError."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(sock_path)
        except OSError as e:
            raise LazyFsError(f"lazyfs control socket {sock_path}: {e}") from None
        buf = b""
        try:
            s.sendall(json.dumps(req).encode() + b"\n")
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise LazyFsError(f"lazyfs control socket {sock_path} closed before answering")
                buf += chunk
        except OSError as e:            # the filesystem's process died while it was asked (reset, timeout)
            raise LazyFsError(f"lazyfs control socket {sock_path}: {e}") from None
    resp = json.loads(buf)
    if not resp.get("ok"):
        raise LazyFsError(f"lazyfs {req.get('op')}: {resp.get('error')}")
    return resp["result"]


class LazyFs:
    """One lazy filesystem: BACKING mirrored at MOUNTPOINT, controlled over a Unix socket."""

    def __init__(self, backing: str, mountpoint: str, control: str | None = None, log: str | None = None):
        self.backing = os.path.abspath(backing)
        self.mountpoint = os.path.abspath(mountpoint)
        if control is None:
            parent, name = os.path.split(self.mountpoint)
            control = os.path.join(parent, f".{name}.lazyfs.sock")
        if len(control.encode()) > 100:  # sun_path holds 108 bytes
            digest = hashlib.sha1(control.encode()).hexdigest()[:16]
            control = f"/tmp/lazyfs-{digest}.sock"
        self.control = control
        self.log = log or os.path.join(os.path.dirname(self.mountpoint),
                                       f".{os.path.basename(self.mountpoint)}.lazyfs.log")
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def available() -> str | None:
        """None when a lazy filesystem can be mounted here, else the one-line reason why not."""
        dev = fuse_device()
        if not os.path.exists(dev):
            return f"lazyfs: no {dev} on this machine (pass --device /dev/fuse to a container)"
        try:
            os.close(os.open(dev, os.O_RDWR))
        except OSError as e:
            return f"lazyfs: {dev} cannot be opened: {e.strerror}"
        if shutil.which("fusermount3") is None:
            return "lazyfs: fusermount3 is missing (Debian's fuse3 package)"
        if ctypes.util.find_library("fuse3") is None:
            return "lazyfs: libfuse3 is missing (Debian's libfuse3-3 package)"
        if importlib.util.find_spec("mfusepy") is None:
            return "lazyfs: the Python binding mfusepy is missing (pip install -e '.[lazyfs]')"
        return None

    @property
    def mounted(self) -> bool:
        return self.mountpoint in lazyfs_mounts()

    def mount(self, timeout: float = 30.0) -> "LazyFs":
        reason = self.available()
        if reason:
            raise LazyFsUnavailable(reason)
        if self.mounted:
            raise LazyFsError(f"lazyfs: {self.mountpoint} is already a lazyfs mount")
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        logf = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cluster.lazyfs", "mount", self.backing, self.mountpoint,
                 "--control", self.control],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=logf,
                start_new_session=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        finally:
            logf.close()
        line = self._read_ready(timeout)
        if line != b"ready\n" or not self.mounted:
            self._abandon()
            raise LazyFsError(f"lazyfs: mounting {self.mountpoint} failed: {self._log_tail()}")
        return self

    def _read_ready(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        try:
            while not buf.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return buf
                chunk = os.read(self.proc.stdout.fileno(), 64)
                if not chunk:
                    return buf
                buf += chunk
        finally:
            sel.close()
        return buf

    def _log_tail(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
        except OSError:
            lines = []
        return " | ".join(lines[-3:]) or "(no output)"

    def _abandon(self) -> None:
        if self.mounted:
            _fusermount_unmount(self.mountpoint)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
            self.proc.stdout.close()

    def unmount(self, timeout: float = 30.0) -> None:
        if self.mounted:
            _fusermount_unmount(self.mountpoint)
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None

    def __enter__(self) -> "LazyFs":
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()

    # ----- faults -----

    def _req(self, op: str, **kw):
        return request(self.control, {"op": op, **kw})

    def status(self) -> dict:
        return self._req("status")

    def sync_all(self) -> dict:
        return self._req("sync-all")

    def lose_unsynced(self) -> dict:
        return self._req("lose-unsynced")

    def torn_write(self, seed: int, ordered: bool = False) -> dict:
        return self._req("torn-write", seed=seed, ordered=ordered)

    def corrupt(self, path: str, offset: int, length: int, seed: int) -> dict:
        """Flip `length` bytes at `offset` of `path` (relative to the mount point)."""
        rel = os.path.relpath(os.path.abspath(os.path.join(self.mountpoint, path)), self.mountpoint)
        if rel.startswith(".."):
            raise LazyFsError(f"lazyfs corrupt: {path} is outside {self.mountpoint}")
        return self._req("corrupt", path="/" + rel, offset=offset, length=length, seed=seed)
