"""A service's log file rotates: $EOSLAB_LOG_FILE never grows past $EOSLAB_LOG_MAX_BYTES, three old files kept."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration     # a child process (logging is set up once per process)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_service_log_rotates(tmp_path):
    log = tmp_path / "broker-1.log"
    code = ("import logging; from eoslab.common import rpc; rpc.setup_logging('broker-1'); "
            "[logging.getLogger('t').warning('x' * 200) for _ in range(2000)]")
    env = dict(os.environ, EOSLAB_LOG_FILE=str(log), EOSLAB_LOG_MAX_BYTES="20000", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["broker-1.log", "broker-1.log.1", "broker-1.log.2", "broker-1.log.3"]
    assert all(p.stat().st_size <= 20000 for p in tmp_path.iterdir())
    assert r.stderr == ""                  # the log went to the file, not to stderr
