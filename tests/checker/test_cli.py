"""`eoslab check` end to end: one JSON object on stdout, exit codes 0/1/2/3, --out, --initial."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "kafka"


def check(*args):
    return subprocess.run([sys.executable, "-m", "eoslab", "check", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def one_json(out):
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    return json.loads(lines[0])


def test_valid_history_exits_0():
    out = check(DATA / "valid.jsonl")
    assert out.returncode == 0, out.stderr
    r = one_json(out)
    assert r["valid"] is True and r["anomalies"] == {} and r["stats"]["ops"] == 12


def test_invalid_history_exits_1_with_the_anomaly():
    out = check(DATA.relative_to(ROOT) / "duplicate.jsonl", "--model", "kafka", "--format", "jsonl")
    assert out.returncode == 1, out.stderr
    r = one_json(out)
    assert r["valid"] is False and list(r["anomalies"]) == ["duplicate"]
    assert r["anomalies"]["duplicate"][0]["offsets"] == [0, 1]


def test_missing_file_exits_2_with_one_line():
    out = check(DATA / "no-such-history.jsonl")
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "no-such-history.jsonl" in out.stderr


def test_malformed_line_exits_2_naming_the_line(tmp_path):
    h = tmp_path / "h.jsonl"
    h.write_text((DATA / "valid.jsonl").read_text().splitlines()[0] + "\n"
                 + '{"index":1,"process":0,"type":"ok","f":"send","value":[["send",1,[0,10]]]}\n'
                 + '{"index":2,"process":0,"type":"invoke","f":"send",\n')
    out = check(h)
    assert out.returncode == 2
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "line 3" in line and "Traceback" not in out.stderr


def test_time_limit_exits_3_unknown():
    out = check(DATA / "duplicate.jsonl", "--time-limit", "0")
    assert out.returncode == 3, out.stderr
    assert one_json(out)["valid"] == "unknown"


def test_out_writes_results_and_report(tmp_path):
    d = tmp_path / "run1"
    out = check(DATA / "g1c.jsonl", "--out", d)
    assert out.returncode == 1
    r = one_json(out)
    assert json.loads((d / "results.json").read_text()) == r
    html = (d / "report.html").read_text()
    assert "INVALID" in html and "G1c" in html


def test_strict_unseen_flag(tmp_path):
    h = tmp_path / "h.jsonl"
    h.write_text("\n".join((DATA / "lost-write.jsonl").read_text().splitlines()[:-2]) + "\n")
    assert check(h).returncode == 0
    out = check(h, "--strict-unseen")
    assert out.returncode == 1 and "unseen" in one_json(out)["anomalies"]


def test_initial_is_a_json_literal_for_linearizability_models(tmp_path):
    pytest.importorskip("checker.linear")
    h = tmp_path / "reg.jsonl"
    h.write_text('{"index":0,"process":0,"type":"invoke","f":"read","value":null}\n'
                 '{"index":1,"process":0,"type":"ok","f":"read","value":5}\n')
    assert check(h, "--model", "register", "--initial", "5").returncode == 0
    out = check(h, "--model", "register", "--initial", "0")
    assert out.returncode == 1
    assert "nonlinearizable" in one_json(out)["anomalies"]
    assert check(h, "--model", "register", "--initial", '"5"').returncode == 1   # the string "5"


def test_bad_initial_exits_2():
    out = check(DATA / "valid.jsonl", "--model", "register", "--initial", "{nope")
    assert out.returncode == 2 and "--initial" in out.stderr and out.stdout == ""
    out = check(DATA / "valid.jsonl", "--initial", "0")          # kafka takes no initial value
    assert out.returncode == 2 and "--initial" in out.stderr


def test_the_kafka_release_of_a_run_is_in_results_and_report(tmp_path):
    """A history that `eoslab run` recorded sits beside its run.json: results and report name the
    Kafka release (and workload) it is true of."""
    import shutil
    h = tmp_path / "history.jsonl"
    shutil.copy(DATA / "valid.jsonl", h)
    (tmp_path / "run.json").write_text(json.dumps({"kafka_version": "2.5", "workload": "queue", "seed": 3}))
    r = check(h, "--model", "kafka", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "results.json").read_text())["run"] == {"kafka_version": "2.5",
                                                                                  "workload": "queue"}
    assert "kafka version 2.5" in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.parametrize("bad", ["nan", "inf", "-1", "soon"])
def test_time_limit_must_be_a_finite_number_of_seconds(bad):
    out = check(DATA / "valid.jsonl", "--time-limit", bad)
    assert out.returncode == 2 and "--time-limit" in out.stderr and len(out.stderr.strip().splitlines()) <= 2, \
        out.stderr


def test_a_lab_runs_fenced_producer_gets_its_say_why_in_results(tmp_path):
    """`eoslab check` on a run directory reads the history's ops for the say-why: a producer fenced
    after a clock jump on its coordinator is "fenced by transaction timeout", not a zombie."""
    tid = "clock-batch"
    prod = {"pid": 1000, "epoch": 0, "session": "app", "transactional_id": tid}
    ops = [{"process": 0, "type": "invoke", "f": "init-producer", "value": None},
           {"process": 0, "type": "ok", "f": "init-producer", "value": None, "producer": prod},
           {"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]},
           {"process": "nemesis", "type": "info", "f": "start-clock-jump", "value": None},
           {"process": "nemesis", "type": "info", "f": "start-clock-jump",
            "value": {"node": "txn-coordinator-1", "offset_s": 120}},
           {"process": 0, "type": "fail", "f": "txn", "value": [["send", 0, 1]], "producer": prod,
            "error": "PRODUCER_FENCED"}]
    h = tmp_path / "history.jsonl"
    h.write_text("".join(json.dumps(dict(o, index=i, time=i)) + "\n" for i, o in enumerate(ops)))
    (tmp_path / "run.json").write_text(json.dumps({"kafka_version": "4.0", "workload": "txn", "seed": 3}))
    r = check(h, "--model", "kafka", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    why = json.loads((tmp_path / "out" / "results.json").read_text())["why"]
    assert why["fenced"][0]["why"].startswith("fenced by transaction timeout (clock jump on txn-coordinator-1)")
