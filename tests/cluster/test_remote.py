"""Clients in their own processes (cluster.workloads.remote): the protocol against real child processes."""
import itertools
import json
import time

import pytest

from cluster.history import History
from cluster.workloads.remote import RemoteClient

pytestmark = pytest.mark.integration


def _ops(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_invoke_before_acting_completion_and_a_death_with_an_op_open(tmp_path):
    h = History(str(tmp_path / "h.jsonl"))
    seen = []
    procs = itertools.count(100)
    c = RemoteClient(h, 7, "tests.cluster.remote_child", ["ok"], "t", lambda: next(procs),
                     on_checkpoint=lambda client, name: seen.append((name, h.size)))
    assert c.exited.wait(30)
    h.close()
    ops = _ops(tmp_path / "h.jsonl")
    assert [(o["process"], o["type"], o["f"]) for o in ops] == [
        (7, "invoke", "send"), (7, "ok", "send"), (7, "invoke", "poll"), (7, "info", "poll"),
        ("lab", "info", "lab-error")]
    assert ops[1]["seq"] == [0] and ops[1]["value"] == [["send", 0, [0, 1]]]
    assert ops[3]["error"] == "client process exited"
    # it died on its own (exit status 3), not by the workload's kill: the lab failed, not Kafka
    assert ops[4]["value"]["kind"] == "client-process" and "exit status 3" in ops[4]["value"]["message"]
    assert c.lab_error == ops[4]["value"]
    assert seen == [("middle", 2)]                 # the hook ran after the send completed, before the poll


def test_info_retires_the_process_and_halt_stops_the_child(tmp_path):
    h = History(str(tmp_path / "h.jsonl"))
    procs = itertools.count(100)
    c = RemoteClient(h, 1, "tests.cluster.remote_child", ["stop"], "t", lambda: next(procs))
    deadline = time.monotonic() + 30
    while h.size < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    c.halt()
    assert c.exited.wait(30)
    h.close()
    ops = _ops(tmp_path / "h.jsonl")
    pairs = list(zip(ops[::2], ops[1::2]))
    assert len(ops) % 2 == 0 and all(a["process"] == b["process"] for a, b in pairs)
    assert [a["process"] for a, _ in pairs][:3] == [1, 100, 101]   # a new process after each info


def test_a_child_the_workload_kills_is_no_lab_error(tmp_path):
    h = History(str(tmp_path / "h.jsonl"))
    procs = itertools.count(100)
    c = RemoteClient(h, 1, "tests.cluster.remote_child", ["stop"], "t", lambda: next(procs))
    deadline = time.monotonic() + 30
    while h.size < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    c.kill()                                       # the workload's own SIGKILL: a fault it injects
    assert c.exited.wait(30)
    h.close()
    assert c.lab_error is None and not any(o["process"] == "lab" for o in _ops(tmp_path / "h.jsonl"))
