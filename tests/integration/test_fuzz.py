"""bench/fuzz.py keeps working: a short fuzz of its own cluster passes every check and prints its table."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_short_fuzz_passes_every_check(tmp_path):
    env = dict(os.environ, EOSLAB_HOME=str(tmp_path))
    for k in ("EOSLAB_CLUSTER_SECRET", "EOSLAB_CLUSTER_SECRET_FILE"):   # the fuzzer is an outsider
        env.pop(k, None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "fuzz.py"), "--requests", "240",
                        "--records", "100", "--time-limit", "120", "--seed", "7"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    for check in ("no process crashed", "records written before (100) read back once at their offsets",
                  "controller epoch unchanged", "a new topic and a new transaction work afterwards"):
        assert f"| {check} | ok |" in out, out
    assert "| garbage | 80 |" in out and "| hostile | 80 |" in out
