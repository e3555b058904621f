"""What /proc says of a process: its state letter, its command line and its working directory (Linux).

Guarantees: every read answers None (or "gone") for a process that does not exist, and a zombie
(exited, waiting for its parent to reap it) counts as gone; nothing here raises for a pid that
vanished between two reads.
"""
from __future__ import annotations

import os


def state(pid: int) -> str | None:
    """The process's state letter (R, S, D, T for stopped, t for traced, Z for zombie...), or None
    when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]     # the name in parentheses may hold spaces
    except (OSError, IndexError):
        return None


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for its parent."""
    return state(pid) in (None, "Z")


def paused(pid: int) -> bool:
    """Stopped by a signal (SIGSTOP) or a tracer."""
    return state(pid) in ("T", "t")


def all_threads_stopped(pid: int) -> bool:
    """Every thread of the process is stopped (SIGSTOP takes effect thread by thread, after kill()
    returns); False for a process that is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                    return False
        except (OSError, IndexError):
            continue                     # a thread that ended meanwhile
    return bool(tasks)


def cmdline(pid: int) -> str | None:
    """The process's arguments joined by spaces, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks after boot (field 22 of /proc/PID/stat): with the pid,
    it names one process even after the pid is reused. None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def cwd(pid: int) -> str | None:
    """The process's working directory as the kernel names it ("<path> (deleted)" once it was
    removed); None when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
