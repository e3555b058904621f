"""bench/analyze.py's CPU split: a process that changes what it is (spark-submit's bash script
exec'ing java in the same pid) counts for what it became, not for what it was first seen as."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.helpers import script_module

pytestmark = pytest.mark.integration


def _bench():
    return script_module("bench", "analyze.py")


class _Pids:
    """The processes to split: here one child, not a cgroup."""

    def __init__(self, pid: int):
        self.pid = pid

    def pids(self) -> list[int]:
        return [self.pid]


def test_split_counts_a_pid_that_execs_java_as_the_jvm(tmp_path):
    bench = _bench()
    java = tmp_path / "java"                    # a "java" that burns CPU: python under that name
    java.symlink_to(sys.executable)
    busy = "import time\nt=time.process_time()\nwhile time.process_time()-t<1.0: pass\n"
    # first a shell whose command line names the app, as spark-submit's does, then java in its pid
    child = subprocess.Popen(["bash", "-c", f'sleep 0.8; exec "{java}" -S -c "$0"', busy,
                              "--name", "eoslab analyze"])
    split = bench.Split(_Pids(child.pid))
    split.start()
    time.sleep(0.5)
    assert split.seen[child.pid][0] == "driver"        # what it is at first sight
    child.wait(30)
    time.sleep(0.3)
    parts = split.seconds()
    assert parts.get("JVM", 0) >= 0.5, parts
    assert parts.get("driver", 0) == 0, parts
