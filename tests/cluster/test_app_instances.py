"""AppInstances (cluster.apps.instances) with real processes and no cluster: signals, exits, the stop."""
import os
import sys

import pytest

from cluster.apps.instances import AppInstances
from cluster.history import History
from tests.helpers import wait_for

pytestmark = pytest.mark.fast

# on SIGTERM it takes a second to "finish its transaction", then says so and exits 0
GRACEFUL = (f"{sys.executable} -c \"import signal, sys, time\n"
            "def term(*_):\n    time.sleep(1); print('clean exit', flush=True); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, term); print('started', flush=True)\n"
            "while True: time.sleep(0.05)\"")


def instances(tmp_path, cmd, n=1):
    return AppInstances(cmd, n, History(str(tmp_path / "h.jsonl")), str(tmp_path), bootstrap="127.0.0.1:1",
                        input_topic="in", output_topic="out", group="g", run_id="r")


def log(tmp_path, i=0, k=0) -> str:
    p = tmp_path / "instances" / f"{i}.{k}.log"
    return p.read_text() if p.exists() else ""


def test_stop_gives_the_command_under_the_shell_its_grace_to_finish(tmp_path):
    """The shell dies of SIGTERM at once; the command it started must still get its grace period."""
    apps = instances(tmp_path, GRACEFUL + "; echo after")     # a compound command: the shell stays
    apps.start_all()
    wait_for(lambda: "started" in log(tmp_path), timeout=20, what="the app to start")
    apps.stop_all(grace_s=10)
    assert "clean exit" in log(tmp_path)
    assert not apps.live()


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    apps = instances(tmp_path, "trap '' TERM; sleep 600 & echo child $!; wait")
    apps.start_all()
    wait_for(lambda: "child" in log(tmp_path), timeout=20, what="the child")
    child = int(log(tmp_path).split()[1])
    apps.stop_all(grace_s=1)
    wait_for(lambda: not os.path.exists(f"/proc/{child}") or
             open(f"/proc/{child}/stat").read().split(") ")[-1][0] == "Z", timeout=10, what="the child to die")


def test_an_exit_by_itself_is_recorded_with_its_code_and_a_kill_as_the_labs(tmp_path):
    apps = instances(tmp_path, "sleep 600", n=2)
    apps.start_all()
    apps.kill(1)
    apps.stop_all(grace_s=2)
    hist = (tmp_path / "h.jsonl").read_text()
    assert '"by":"lab"' in hist.replace(" ", "") and '"f":"app-exit"' in hist.replace(" ", "")
    assert not apps.live()
