"""`eoslab run` against a real local cluster whose broker is stopped by someone other than the nemesis:
the run ends as a lab error (exit 4), never valid and never anomalies, and results.json says why."""
import json
import os
import subprocess
import sys
import time

import pytest

from cluster.local import LocalRuntime

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _wait_for(cond, timeout: float, what: str, proc=None):
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"eoslab run ended (exit {proc.returncode}) before {what}: {proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.05)


def _acknowledged(path) -> bool:
    try:
        with open(path) as f:
            return any('"type":"ok","f":"send"' in line for line in f)
    except FileNotFoundError:
        return False


def test_a_broker_stopped_outside_the_nemesis_makes_the_run_a_lab_error(cluster, eoslab_home, tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, EOSLAB_HOME=eoslab_home, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "eoslab", "run", "--cluster", cluster.cluster_name,
                             "--workload", "queue", "--nemesis", "none", "--time-limit", "4", "--seed", "9",
                             "--out", str(out)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for(lambda: _acknowledged(out / "history.jsonl"), 120, "acknowledged send", proc)
        # an operator's stray kill, an OOM killer: the broker goes away and no fault of the run did it
        LocalRuntime.load(cluster.cluster_name, home=eoslab_home).kill("broker-3")
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4, err[-3000:]
    assert "LAB ERROR" in err
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "lab-error" and results["valid"] != True and results["anomalies"] == {}  # noqa: E712
    down = [e for e in results["lab_errors"] if e["kind"] == "service-down"]
    assert [e["node"] for e in down] == ["broker-3"], results["lab_errors"]
    assert "no fault in force" in down[0]["message"] and isinstance(down[0]["log"], list)
    meta = json.loads((out / "run.json").read_text())
    assert meta["lab_errors"] == results["lab_errors"] and meta["nemesis_errors"] == []
    assert "not about Kafka" in (out / "report.html").read_text()
    # the final heal brought the broker back: the shared cluster is whole again for whoever comes next
    assert all(n.state == "running" for n in LocalRuntime.load(cluster.cluster_name, home=eoslab_home).info().nodes)
