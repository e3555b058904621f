"""Lab errors without a cluster: what counts as the lab failing (cluster.lab_errors), the verdict and
exit status they give (checker.result), the notes a dying thread leaves, and a run that raises."""
from __future__ import annotations

import json
import os
import time

import pytest

from checker.result import EXIT_BAD_INPUT, EXIT_INVALID, EXIT_LAB_ERROR, EXIT_VALID, exit_code, with_verdict
from cluster import lab_errors as lab
from cluster.history import History

pytestmark = pytest.mark.fast

T0 = time.mktime(time.strptime("2026-11-25 10:00:00", "%Y-%m-%d %H:%M:%S"))


def ts(s: float) -> str:
    """A service log record's timestamp, s seconds after T0."""
    t = T0 + s
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(round(t * 1000)) % 1000:03d}"


def logged(s: float, node: str, exc: list[str], msg: str = "produce failed") -> list[str]:
    return [f"{ts(s)} {node} ERROR services.broker.kafka_server: {msg}", "Traceback (most recent call last):",
            '  File "/work/main/services/broker/replica_manager.py", line 10, in append_records',
            "    x = self.partitions[tp]", *exc]


UNAVAILABLE = ["grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:",
               "\tstatus = StatusCode.UNAVAILABLE", '\tdetails = "failed to connect to all addresses"', ">"]
CONNECTION_LOSS = ["kazoo.exceptions.ConnectionLoss"]
BUG = ["KeyError: ('t', 0)"]


def fault(package: str, start: float, end: float | None, target=None) -> dict:
    return {"package": package, "start": T0 + start, "end": None if end is None else T0 + end, "target": target}


# ------------------------------------------------------------------ the verdict and the exit status
def test_a_result_with_lab_errors_is_lab_error_with_its_own_exit_status():
    valid = {"valid": True, "anomalies": {}, "stats": {"anomaly_counts": {}}}
    assert with_verdict(valid)["verdict"] == "valid" and exit_code(with_verdict(valid)) == EXIT_VALID
    err = {"kind": "thread", "thread": "client-1", "message": "ValueError: bad", "log": ["Traceback ..."]}
    r = with_verdict(valid, [err])
    assert list(r)[0] == "verdict" and r["verdict"] == "lab-error" and r["valid"] == "unknown"
    assert r["lab_errors"] == [err] and exit_code(r) == EXIT_LAB_ERROR == 4
    assert len({0, 1, 2, 3, EXIT_LAB_ERROR}) == 5                       # a status of its own


def test_anomalies_with_a_lab_error_are_unconfirmed_never_anomalies():
    found = {"duplicate": [{"key": 0, "value": 7}]}
    invalid = {"valid": False, "anomalies": found, "stats": {"anomaly_counts": {"duplicate": 1}}}
    assert exit_code(with_verdict(invalid)) == EXIT_INVALID
    r = with_verdict(invalid, [{"kind": "service-down", "node": "broker-2", "message": "dead", "log": []}])
    assert r["verdict"] == "lab-error" and exit_code(r) == EXIT_LAB_ERROR
    assert r["anomalies"] == {} and r["unconfirmed"] == found
    assert r["stats"]["anomaly_counts"] == {} and r["stats"]["unconfirmed_counts"] == {"duplicate": 1}
    assert invalid["anomalies"] == found and invalid["valid"] is False   # the checker's own result untouched


# ------------------------------------------------------------------ reading logs
def test_scan_finds_logged_chained_unhandled_and_cut_short_tracebacks():
    lines = [f"{ts(0)} broker-1 INFO x: started", *logged(1, "broker-1", UNAVAILABLE),
             f"{ts(2)} broker-1 INFO x: going on",
             *logged(3, "broker-1", ["ValueError: first", "", "During handling of the above exception, another "
                                     "exception occurred:", "", "Traceback (most recent call last):",
                                     '  File "a.py", line 1, in f', "RuntimeError: second"]),
             "Exception in thread replica-fetcher-2:", "Traceback (most recent call last):",
             '  File "b.py", line 2, in run', "AttributeError: 'NoneType' object has no attribute 'x'",
             "Traceback (most recent call last):", '  File "c.py", line 3, in g']
    found = lab.scan(lines)
    assert [(t.exception.splitlines()[0] if t.exception else None, t.logged) for t in found] == [
        ("grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:", True),
        ("RuntimeError: second", True),
        ("AttributeError: 'NoneType' object has no attribute 'x'", False),
        (None, False)]
    assert "StatusCode.UNAVAILABLE" in found[0].exception and found[0].time == pytest.approx(T0 + 1)
    assert found[0].lines[0].endswith("produce failed") and found[2].lines[0].startswith("Exception in thread")


def test_a_killed_nodes_cut_short_traceback_is_the_kill_but_its_bug_is_a_lab_error():
    """SIGKILL cuts a node's log where it was: a traceback without its exception line in a node the
    nemesis killed is the kill. A complete traceback of a bug in that node is not the kill: Jepsen and
    Kafka's tests count a crash in a server log whatever the nemesis did."""
    kill = [fault("kill", 5, 9, target="broker-2")]
    cut = ["Traceback (most recent call last):", '  File "x.py", line 1, in f']
    assert lab.classify("broker-2", lab.scan(logged(6, "broker-2", []) + cut), kill) == []
    assert [e["kind"] for e in lab.classify("broker-3", lab.scan(cut), kill)] == ["crash"]   # not killed
    bug = lab.classify("broker-2", lab.scan(logged(6, "broker-2", BUG)), kill)
    assert [(e["kind"], e["node"]) for e in bug] == [("traceback", "broker-2")]
    assert "KeyError" in bug[0]["message"] and bug[0]["log"][0].endswith("produce failed")
    assert bug[0]["time"] == ts(6)
    interrupted = lab.scan(["Traceback (most recent call last):", '  File "x.py", line 1', "KeyboardInterrupt"])
    assert lab.classify("broker-2", interrupted, kill) == []
    assert lab.classify("broker-1", interrupted, kill) != []


def test_the_nodes_a_disk_fault_killed_are_killed_nodes():
    """lose-unsynced, torn-write and corrupt SIGKILL every node they name in their target's "nodes": a
    traceback cut short there is the power loss, not a crash."""
    faults = [fault("lose-unsynced", 5, 9, target={"nodes": ["broker-1", "broker-3"], "spread": "leader-isr"}),
              fault("loss", 5, 9, target={"nodes": ["broker-2"]}),          # not a process fault
              fault("kill", 10, 12, target="controller-1")]
    assert lab.killed_nodes(faults) == {"broker-1", "broker-3", "controller-1"}
    cut = ["Traceback (most recent call last):", '  File "x.py", line 1, in f']
    assert lab.classify("broker-3", lab.scan(logged(6, "broker-3", []) + cut), faults) == []


def test_a_peer_out_of_reach_is_the_fault_only_while_a_fault_is_in_force():
    kill = [fault("kill", 5, 9, target="broker-2")]
    during = lab.scan(logged(7, "broker-1", UNAVAILABLE))
    assert lab.classify("broker-1", during, kill) == []
    assert lab.classify("broker-1", lab.scan(logged(9 + lab.GRACE_S - 1, "broker-1", UNAVAILABLE)), kill) == []
    outside = lab.classify("broker-1", lab.scan(logged(40, "broker-1", UNAVAILABLE)), kill)
    assert [e["kind"] for e in outside] == ["traceback"] and "outside any fault" in outside[0]["message"]
    retriable = logged(60, "coordinator-1", ["eoslab.common.errors.KafkaError: NOT_ENOUGH_REPLICAS: 1 of 3"])
    assert lab.classify("coordinator-1", lab.scan(retriable), [fault("partition", 58, 62)]) == []
    assert lab.classify("coordinator-1", lab.scan(retriable), []) != []


def test_zookeeper_out_of_reach_counts_only_outside_a_zookeeper_fault():
    trace = lab.scan(logged(7, "controller-1", CONNECTION_LOSS, msg="controller event elect failed"))
    assert lab.classify("controller-1", trace, [fault("partition-zookeeper", 5, 9, "controller-1")]) == []
    assert lab.classify("controller-1", trace, [fault("kill-zookeeper", 5, 9, "zookeeper")]) == []
    assert lab.classify("controller-1", trace, [fault("heal", 6, 8)]) == []
    errs = lab.classify("controller-1", trace, [fault("kill", 5, 9, "broker-1"), fault("partition", 6, 8)])
    assert [e["kind"] for e in errs] == ["zookeeper-unreachable"]


def test_a_power_loss_of_the_whole_cluster_takes_zookeeper_down_and_one_of_brokers_does_not():
    """lose-unsynced with spread "all" kills ZooKeeper with the brokers (its disk too): the services that
    lose it meanwhile are not a lab error; the same package on brokers only does not excuse that."""
    trace = lab.scan(logged(7, "controller-1", CONNECTION_LOSS, msg="controller event elect failed"))
    whole = {"nodes": ["broker-1", "broker-2", "zookeeper"], "spread": "all"}
    assert lab.classify("controller-1", trace, [fault("lose-unsynced", 5, 9, whole)]) == []
    assert "zookeeper" in lab.killed_nodes([fault("torn-write", 5, 9, whole)])
    brokers = {"nodes": ["broker-1", "broker-2"], "spread": "leader-isr"}
    errs = lab.classify("controller-1", trace, [fault("lose-unsynced", 5, 9, brokers)])
    assert [e["kind"] for e in errs] == ["zookeeper-unreachable"]


def test_an_unhandled_exception_is_a_crash_even_during_a_fault_and_fatal_lines_count():
    crash = ["Exception in thread zk-watcher:", "Traceback (most recent call last):", '  File "z.py", line 9',
             *UNAVAILABLE]
    errs = lab.classify("broker-1", lab.scan(crash), [fault("partition", 0, 100)])
    assert [e["kind"] for e in errs] == ["crash"]
    fatal = lab.classify("zookeeper", lab.scan([f"{ts(3)} [myid:] - ERROR [main] - Unexpected exception, "
                                                f"exiting abnormally"]), [])
    assert [e["kind"] for e in fatal] == ["fatal"]
    ignored = ["Exception ignored in: <function Channel.__del__ at 0x7f>", "Traceback (most recent call last):",
               '  File "g.py", line 1', "ValueError: closed"]
    assert lab.classify("broker-1", lab.scan(ignored), []) == []


def test_log_mark_reads_only_what_the_run_wrote_also_across_a_rotation(tmp_path):
    class Node:
        def __init__(self, name):
            self.name = name

    class Rt:
        name, dir = "local", str(tmp_path)

        def info(self):
            return type("I", (), {"nodes": [Node("broker-1")]})()

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "broker-1.log").write_text("old 1\nold 2\n")
    (logs / "broker-1.out").write_text("")
    mark = lab.LogMark(Rt())
    with open(logs / "broker-1.log", "a") as f:
        f.write("new 1\n")
    (logs / "broker-1.out").write_text("crash\n")
    assert mark.read("broker-1") == [["new 1"], ["crash"]]
    os.replace(logs / "broker-1.log", logs / "broker-1.log.1")          # rotated, then a short new file
    (logs / "broker-1.log").write_text("new 2\n")
    assert mark.read("broker-1")[0] == ["new 1", "new 2"]


def test_nodes_down_and_merge():
    class Node:
        def __init__(self, name, state, role="broker"):
            self.name, self.state, self.role, self.host, self.port = name, state, role, "127.0.0.1", 1
            self.address = "127.0.0.1:1"

    class Rt:
        name = "docker"

        def info(self):
            return type("I", (), {"nodes": [Node("broker-1", "running"), Node("broker-2", "dead")]})()

        def logs(self, node, tail):
            return "last words\n"

    errs = lab.nodes_down(Rt(), "before the final heal", settle=0.3)
    assert [(e["kind"], e["node"], e["log"]) for e in errs] == [("service-down", "broker-2", ["last words"])]
    merged = lab.merge(errs * 3 + lab.nemesis_errors(["start-kill: boom"]))
    assert [(e["kind"], e.get("count", 1)) for e in merged] == [("service-down", 3), ("nemesis", 1)]


# ------------------------------------------------------------------ a thread that dies, a run that raises
def test_a_workload_thread_that_dies_leaves_a_note_and_the_history_stays_checkable(tmp_path):
    from checker.kafka import check_kafka
    from cluster.workloads.base import Workload

    h = History(str(tmp_path / "history.jsonl"))
    wl = Workload("127.0.0.1:1", h, 1)
    h.invoke(0, "send", [["send", 0, 1]])
    h.complete(0, "ok", "send", [["send", 0, [0, 1]]])

    def client():
        h.invoke(1, "poll", [["poll"]])
        raise ValueError("workload.bad=1 is not a number")

    wl.spawn(client, name="client-1").join(10)
    h.close()
    ops = [json.loads(ln) for ln in open(tmp_path / "history.jsonl")]
    note = ops[-1]
    assert (note["process"], note["type"], note["f"]) == ("lab", "info", "lab-error")
    assert note["value"]["thread"] == "client-1" and note["value"]["kind"] == "thread"
    assert note["value"]["message"] == "ValueError: workload.bad=1 is not a number"
    assert note["value"]["log"][0] == "Traceback (most recent call last):"
    assert lab.from_notes(h) == [note["value"]] == wl.crashed
    assert check_kafka(str(tmp_path / "history.jsonl"))["stats"]["ops"] == len(ops)   # plain data to the checker


def test_a_run_with_no_runtime_to_run_on_is_an_error_not_a_lab_error(tmp_path, monkeypatch):
    """Nothing ran (the named cluster is not there): exit 2 with the reason, no verdict of any kind."""
    from cluster.run import RunConfig, run
    monkeypatch.setenv("EOSLAB_HOME", str(tmp_path / "home"))
    out = tmp_path / "run"
    cfg = RunConfig(workload="queue", nemesis=["none"], time_limit=1, seed=1, out=str(out), cluster="no-such-cluster")
    assert run(cfg) == EXIT_BAD_INPUT
    meta = json.loads((out / "run.json").read_text())
    assert "no-such-cluster" in meta["error"] and "lab_errors" not in meta
    assert not (out / "results.json").exists()


def test_the_exit_status_table_is_the_one_run_documents():
    import cluster.run
    from checker.result import EXIT_STATUS_HELP
    for line in EXIT_STATUS_HELP.splitlines()[1:]:
        assert line in cluster.run.__doc__
    assert "4  lab-error" in EXIT_STATUS_HELP


def test_a_scenario_the_lab_broke_is_lab_error_not_an_observed_verdict(tmp_path, monkeypatch):
    from cluster import scenarios
    from cluster.scenarios import runner
    sc = scenarios.scenarios()[0]
    monkeypatch.setattr(runner, "play", lambda *a, **kw: "ClusterError: ZooKeeper exited at start")
    outcome = runner.run_scenario(sc, str(tmp_path))
    r = json.loads((tmp_path / sc.name / "results.json").read_text())
    assert not outcome.match and r["verdict"] == "lab-error" and r["anomalies"] == {}
    assert r["lab_errors"][0]["message"] == "ClusterError: ZooKeeper exited at start"
    assert r["scenario"]["error"] == "ClusterError: ZooKeeper exited at start"
