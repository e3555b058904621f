"""cluster.procfs reads a process's state and command line, and a vanished or zombie process is gone."""
import os
import signal
import subprocess
import sys

import pytest

from cluster import procfs
from tests.helpers import wait_for

pytestmark = pytest.mark.fast


def test_a_running_a_stopped_and_a_zombie_process():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "marker-xyz"],
                             stdin=subprocess.PIPE)
    try:
        # running, sleeping, or in a short uninterruptible wait (D: reading its files on a loaded machine)
        assert procfs.state(child.pid) in ("R", "S", "D") and not procfs.gone(child.pid)
        # Popen (vfork) may return while the exec is still setting up the new command line
        wait_for(lambda: "marker-xyz" in (procfs.cmdline(child.pid) or ""), timeout=10, what="the command line")
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)                  # returns once it has stopped
        assert procfs.paused(child.pid) and not procfs.gone(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)   # dead, not reaped: a zombie
        assert procfs.state(child.pid) == "Z" and procfs.gone(child.pid) and not procfs.paused(child.pid)
    finally:
        child.kill()
        child.wait()
    assert procfs.gone(child.pid) and procfs.state(child.pid) is None and procfs.cmdline(child.pid) is None


def test_a_process_name_with_parentheses_and_spaces_is_read_right(tmp_path):
    """/proc/PID/stat puts the name in parentheses; a name holding ") R (" must not fool the reader."""
    odd = tmp_path / "x) R (y"
    odd.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(odd), "30"])
    try:
        def comm():
            with open(f"/proc/{child.pid}/comm") as f:
                return f.read().strip() == "x) R (y"
        # Popen may return (vfork) a moment before the exec renames the process
        wait_for(comm, timeout=10, what="the exec to name the process")
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)
        assert procfs.state(child.pid) == "T"
    finally:
        child.kill()
        child.wait()


def test_a_stopped_process_counts_as_stopped_only_once_every_thread_is():
    code = ("import sys, threading; [threading.Thread(target=sys.stdin.read, daemon=True).start() for _ in range(3)];"
            "print('up', flush=True); threading.Event().wait()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"up\n"
        assert len(os.listdir(f"/proc/{child.pid}/task")) >= 4 and not procfs.all_threads_stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)
        wait_for(lambda: procfs.all_threads_stopped(child.pid), timeout=10, what="every thread stopped")
        os.kill(child.pid, signal.SIGCONT)
        wait_for(lambda: not procfs.all_threads_stopped(child.pid), timeout=10, what="running again")
    finally:
        child.kill()
        child.wait()
    assert not procfs.all_threads_stopped(child.pid)          # gone
