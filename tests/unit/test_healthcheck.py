"""docker/healthcheck.py (the containers' `eoslab-health`): one check at a time, so checks cannot pile up."""
import fcntl
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fast
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "docker", "healthcheck.py")


def check(lock_path, address) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", SCRIPT, "tcp", address], capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, EOSLAB_HEALTH_LOCK=str(lock_path)))


def test_a_check_fails_at_once_while_the_previous_one_still_runs(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    address = "127.0.0.1:%d" % srv.getsockname()[1]
    lock_path = tmp_path / "health.lock"
    try:
        assert check(lock_path, address).returncode == 0          # nothing running: the port answers
        with open(lock_path, "a") as held:                         # a check that has not finished yet
            fcntl.flock(held, fcntl.LOCK_EX)
            r = check(lock_path, address)
        assert r.returncode == 1 and "still running" in r.stderr
        assert check(lock_path, address).returncode == 0          # and the next one runs again
    finally:
        srv.close()
