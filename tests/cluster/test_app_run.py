"""`eoslab app run` against a real local cluster with real application processes (examples/apps/).

Each test runs the harness whole: instances started from a command, app faults, the heal, the drain,
the final read, the log audit and `eoslab check`'s verdict. One cluster serves the module (app faults
touch only the application's processes; every run has topics of its own).
"""
import json
import os
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("confluent_kafka")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


def example(name: str) -> str:
    return f"{PY} {os.path.join(ROOT, 'examples', 'apps', name)}"


@pytest.fixture(scope="module")
def app_cluster(eoslab_home):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-app-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1,
                      txn_coordinators=2)
    rt.up()
    yield rt
    rt.down()


def run(tmp_path, monkeypatch, eoslab_home, cluster, cmd, **kw):
    from cluster.apps.run import AppRunConfig, app_run
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    out = str(tmp_path / "run")
    cfg = AppRunConfig(cmd=cmd, out=out, cluster=cluster.cluster_name, **kw)
    code = app_run(cfg)
    meta = json.load(open(os.path.join(out, "run.json")))
    results = json.load(open(os.path.join(out, "results.json")))
    hist = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    return code, meta, results, hist


def started_pids(hist) -> list[int]:
    return [o["value"]["pid"] for o in hist if o["process"] == "app" and o["f"] == "app-start"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:          # a zombie process (not reaped) is not running
        return f.read().split(") ")[-1][0] != "Z"


def test_a_correct_transactional_copier_is_valid_under_kill_pause_and_zombie_faults(
        tmp_path, monkeypatch, eoslab_home, app_cluster):
    code, meta, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster, example("confluent_copier.py"),
                                    instances=2, records=1500, time_limit=40, seed=3,
                                    nemesis=["kill-app", "pause-app", "zombie-app"], fault_duration=(4.0, 8.0))
    assert (code, results["verdict"]) == (0, "valid"), results.get("anomalies") or results.get("lab_errors")
    assert results["stats"]["input_acknowledged"] == 1500
    faults = {o["f"] for o in hist if o["process"] == "nemesis"}
    assert faults & {"start-kill-app", "start-pause-app", "start-zombie-app"}
    assert meta["kind"] == "app" and meta["incarnations"] >= 2
    assert not [p for p in started_pids(hist) if alive(p)]          # nothing outlives the run
    assert os.path.exists(tmp_path / "run" / "report.html")


# kafka-python (3.0.12) can drop a transaction request when the connection to its killed coordinator breaks
# mid-send and then wait for its answer forever (docs/apps.md); the example's watchdog exits such a process
# after 30 s and its restart goes on. The case takes about 80 s, so it runs with the slow tests.
STALLS = pytest.mark.slow


@pytest.mark.parametrize("app", ["confluent_copier.py", pytest.param("kafka_python_copier.py", marks=STALLS),
                                 "aiokafka_copier.py"])
def test_a_correct_copier_is_valid_under_every_app_fault_and_broker_and_coordinator_kills(
        tmp_path, monkeypatch, eoslab_home, app):
    """Its own cluster (cluster faults), every app fault, a leader and a coordinator killed."""
    from cluster.apps.run import AppRunConfig, app_run
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    out = str(tmp_path / "run")
    code = app_run(AppRunConfig(cmd=example(app), out=out, instances=2, records=2000, time_limit=45, seed=7,
                                nemesis=["kill-app", "pause-app", "zombie-app", "partition-app", "kill-leader",
                                         "kill-coordinator"], fault_duration=(4.0, 10.0),
                                # a loaded 2-core machine: the clients may take a while to resume after the heal
                                quiet_s=60.0, drain_timeout_s=180.0))
    results = json.load(open(os.path.join(out, "results.json")))
    assert (code, results["verdict"]) == (0, "valid"), results.get("anomalies") or results.get("lab_errors")
    hist = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    hit = {o["f"] for o in hist if o["process"] == "nemesis" and o["f"].startswith("start-")}
    assert {"start-kill-leader", "start-kill-coordinator", "start-kill-app"} <= hit
    assert not [p for p in started_pids(hist) if alive(p)]


def schedule(tmp_path, *events) -> str:
    """A --schedule file: (at, package, duration) triples, in the order they start."""
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps([{"at": at, "package": pkg, "duration": d} for at, pkg, d in events]))
    return str(path)


# The wrong copier duplicates when a kill lands after it copied and before its next auto-commit (every 5 s,
# offsets stored once the copies are flushed). Each kill comes 12 s after the one before: past the copier's
# 6 s session and the rebalance that follows, so the group has settled and the killed incarnation holds
# partitions and is copying (the input keeps coming at 75 records/s for 40 s, so there is always something
# copied and not yet committed). Its partitions go to the survivor from the group's last commit, which copies
# the last seconds again. Three such kills; one is enough for the duplicate.
def test_a_copier_without_transactions_is_caught_duplicating_after_kills(
        tmp_path, monkeypatch, eoslab_home, app_cluster):
    kills = schedule(tmp_path, (12, "kill-app", 2), (24, "kill-app", 2), (36, "kill-app", 2))
    code, meta, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster,
                                    example("confluent_no_transactions.py"), instances=2, records=3000, rate=75,
                                    time_limit=45, seed=1, nemesis=["kill-app"], schedule_file=kills)
    assert code == 1 and results["verdict"] == "invalid", results.get("anomalies") or results.get("lab_errors")
    assert "duplicate" in results["anomalies"]
    assert "lost-write" not in results["anomalies"]
    assert [e["at"] for e in meta["schedule"]] == [12, 24, 36] and meta["schedule_file"] == kills
    restarted = [o["value"] for o in hist if o["f"] == "stop-kill-app" and "restarted_as" in (o["value"] or {})]
    assert len(restarted) == 3                          # each kill hit a running instance, restarted at its stop
    assert not [p for p in started_pids(hist) if alive(p)]


# Offsets committed after the transaction, outside it: a duplicate needs the group to move on between the two
# commits. Pausing an instance (SIGSTOP) for 8 s inside a transaction does that: its session (6 s) expires and
# the survivor takes its partitions from the group's last commit; the paused instance resumes, its transaction
# commits (the coordinator's 10 s transaction timeout has not run out), and the offset commit that follows is
# refused (an old generation), so the survivor copies the batch again. `pause-app-in-txn` waits until the
# instance has a transaction open before it pauses: a plain `pause-app` at a fixed time found it waiting in
# consume() on a loaded machine (the batch it had polled did not come back after the group moved on) and the
# run was valid (1 miss in a fresh-clone CI, 2026-11-27). Three pauses, 12 s apart, while the input comes.
# (The transactional copier is valid under pauses: its offsets go with its transaction, which KIP-447's
# generation check then refuses.)
def test_offsets_committed_outside_the_transaction_are_caught_duplicating(
        tmp_path, monkeypatch, eoslab_home, app_cluster):
    pauses = schedule(tmp_path, *[(at, "pause-app-in-txn", 8) for at in (6, 18, 30)])
    code, _, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster,
                                 example("confluent_offsets_outside_txn.py"), instances=2, records=40000,
                                 rate=1000, time_limit=42, seed=1, schedule_file=pauses)
    paused = [o["value"] for o in hist                  # the second of each nemesis pair holds what it hit
              if o["process"] == "nemesis" and o["f"] == "start-pause-app-in-txn" and o["value"] is not None]
    assert len(paused) == 3 and all(p["transaction"] in ("Ongoing", "PrepareCommit") for p in paused), paused
    assert code == 1 and results["verdict"] == "invalid", results.get("anomalies") or results.get("lab_errors")
    assert "duplicate" in results["anomalies"]
    assert "lost-write" not in results["anomalies"]
    assert len([o for o in hist if o["f"] == "app-pause"]) == 3
    assert not [p for p in started_pids(hist) if alive(p)]


# A new transactional.id per process start: a restart aborts nothing. A copier killed inside a transaction
# leaves it open; with the same transactional.id its successor's InitProducerId aborts it within seconds of
# starting, with a new one nobody does until the coordinator's transaction timeout (10 s, checked every 10 s),
# and meanwhile the output's last stable offset stands still: a hanging transaction past 6 s with no fault in
# force (the kill lasts 0.5 s). One instance, so that it holds every partition and is not in a rebalance when
# a kill comes; the input comes fast (4000 records/s for 22 s) while the kills come. Two kills 12 s apart,
# past the transaction timeout, so the stand after the first ends before the second (and on a loaded machine
# the copier may start only after the first). The kills wait for records of an open transaction in the output
# (`kill-app-in-txn`): a plain `kill-app` that found the copier between transactions both times left nothing
# open, and the run was valid (once in a slow-suite run on 2026-11-28, where the LSO equalled the high
# watermark at every sample after both kills). It stays with the slow tests: 2.5 minutes a run.
# Its zombies are not fenced by id either, but Kafka 2.5 on refuses their offsets by group generation
# (KIP-447) and makes a reader wait for offsets pending in an open transaction, so under zombie-app they
# leave no duplicate in this lab (docs/apps.md).
@pytest.mark.slow
def test_a_new_transactional_id_per_restart_leaves_a_killed_transaction_hanging(
        tmp_path, monkeypatch, eoslab_home, app_cluster):
    kills = schedule(tmp_path, *[(at, "kill-app-in-txn", 0.5) for at in (5, 17)])
    code, _, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster,
                                 example("confluent_new_txn_id_per_restart.py"), instances=1, records=88000,
                                 rate=4000, time_limit=28, seed=1, schedule_file=kills, hang_threshold_s=6)
    killed = [o["value"] for o in hist
              if o["process"] == "nemesis" and o["f"] == "start-kill-app-in-txn" and o["value"] is not None]
    assert len(killed) == 2 and any(k["open"] for k in killed), killed
    assert code == 1 and results["verdict"] == "invalid", results.get("anomalies") or results.get("lab_errors")
    assert "hanging-transaction" in results["anomalies"]
    assert "lost-write" not in results["anomalies"]
    assert not [p for p in started_pids(hist) if alive(p)]


def test_a_command_that_exits_at_once_gets_a_clear_verdict_and_no_wait(tmp_path, monkeypatch, eoslab_home,
                                                                       app_cluster):
    code, meta, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster, "echo cannot start >&2; exit 3",
                                    instances=2, records=100, time_limit=120)
    assert code == 2
    assert results["verdict"] == "app-error"
    assert "exited with code 3 at start" in results["app_errors"][0]
    assert "cannot start" in results["app_errors"][0]
    assert [o["value"]["by"] for o in hist if o["f"] == "app-exit"] == ["self", "self"]
    assert hist[-1]["time"] < 60e9                     # ended at once, not after the 120 s time limit


def test_an_app_that_never_writes_is_named_and_every_input_is_lost(tmp_path, monkeypatch, eoslab_home,
                                                                  app_cluster):
    code, _, results, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster, "exec sleep 600",
                                 instances=1, records=50, time_limit=8, first_output_s=3, quiet_s=2)
    assert code == 1
    assert any("no output" in e for e in results["app_errors"])
    assert results["stats"]["anomaly_counts"]["lost-write"] == 50
    assert not [p for p in started_pids(hist) if alive(p)]          # the sleeping app was stopped


def test_garbage_in_the_output_is_an_unexpected_value(tmp_path, monkeypatch, eoslab_home, app_cluster):
    writer = (f"{PY} -c \"import os; from confluent_kafka import Producer; "
              "p = Producer({'bootstrap.servers': os.environ['EOSLAB_BOOTSTRAP']}); "
              "p.produce(os.environ['EOSLAB_OUTPUT_TOPIC'], b'\\xff not an input'); p.flush(30); "
              "import time; time.sleep(600)\"")
    code, _, results, _ = run(tmp_path, monkeypatch, eoslab_home, app_cluster, writer, instances=1, records=20,
                              time_limit=6, first_output_s=30, quiet_s=2)
    assert code == 1
    assert "unexpected-value" in results["anomalies"]


def test_the_instances_get_the_documented_environment(tmp_path, monkeypatch, eoslab_home, app_cluster):
    from cluster.apps.contract import ENV_VARS
    dump = f"{PY} -c \"import json, os; print(json.dumps({{k: v for k, v in os.environ.items() if k.startswith('EOSLAB_')}}))\"; exec sleep 600"
    run(tmp_path, monkeypatch, eoslab_home, app_cluster, dump, instances=2, records=10, time_limit=3,
        first_output_s=1, quiet_s=1)
    envs = [json.loads(open(tmp_path / "run" / "instances" / f"{i}.0.log").readline()) for i in range(2)]
    assert {k for k in envs[0] if k != "EOSLAB_HOME"} == set(ENV_VARS)
    assert [e["EOSLAB_INSTANCE"] for e in envs] == ["0", "1"]
    assert envs[0]["EOSLAB_GROUP_ID"] == envs[1]["EOSLAB_GROUP_ID"]
    assert envs[0]["EOSLAB_TRANSACTIONAL_ID"] != envs[1]["EOSLAB_TRANSACTIONAL_ID"]
    assert envs[0]["EOSLAB_BOOTSTRAP"] == app_cluster.info().kafka_bootstrap


def test_bad_arguments_are_one_line_and_start_nothing(tmp_path):
    r = subprocess.run([PY, "-m", "eoslab", "app", "run", "--cmd", "true", "--nemesis", "kill-app,bogus",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "bogus" in r.stderr
    assert not os.path.exists(tmp_path / "o")


def test_signals_reach_the_whole_process_group(tmp_path, monkeypatch, eoslab_home, app_cluster):
    """A command that forks (a shell running a child) is stopped whole: the child does not outlive the run."""
    code, _, _, hist = run(tmp_path, monkeypatch, eoslab_home, app_cluster,
                           "sleep 600 & echo child $! ; wait", instances=1, records=5, time_limit=2,
                           first_output_s=1, quiet_s=1)
    child = int(open(tmp_path / "run" / "instances" / "0.0.log").read().split()[1])
    assert not alive(child)
    assert code == 1
