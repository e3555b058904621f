"""Bad and empty histories: `eoslab check` rejects malformed ok ops and duplicate indices
(exit 2, one stderr line naming the line) and never calls a history with nothing to check valid."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker.history import HistoryError
from checker.kafka import check_kafka
from checker.linear import check_linearizable

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
VALID = (ROOT / "tests" / "data" / "kafka" / "valid.jsonl").read_text().splitlines()


def check(*args):
    return subprocess.run([sys.executable, "-m", "eoslab", "check", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def write(tmp_path, lines):
    p = tmp_path / "h.jsonl"
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


def ok_send_line():
    """(line number, op) of the first ok send in valid.jsonl."""
    for n, raw in enumerate(VALID, 1):
        d = json.loads(raw)
        if d["type"] == "ok" and d["f"] == "send":
            return n, d
    raise AssertionError("valid.jsonl has no ok send")


def rejected(out, line):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    (msg,) = out.stderr.splitlines()
    assert f"line {line}:" in msg, msg
    return msg


@pytest.mark.parametrize("bad_value,says", [
    (None, "value must be a list"),                                    # value missing
    ("oops", "value must be a list"),
    ([["send", 0]], "must be [\"send\", key, [offset, value]]"),
    ([["send", 0, [0, None]]], "sent value must be"),
    ([["send", 0, [0, [1, 2]]]], "sent value must be"),
    ([["send", 0, ["zero", 1]]], "offset must be an integer"),
    ([["send", {"k": 1}, [0, 1]]], "must be [\"send\", key"),
    ([[]], "non-empty list"),
])
def test_an_ok_send_without_the_contracts_shape_is_rejected_naming_its_line(tmp_path, bad_value, says):
    n, d = ok_send_line()
    lines = list(VALID)
    if bad_value is None:
        del d["value"]
    else:
        d["value"] = bad_value
    lines[n - 1] = json.dumps(d)
    msg = rejected(check(write(tmp_path, lines)), n)
    assert says in msg


@pytest.mark.parametrize("bad_poll,says", [
    ([["poll", [[0, 1]]]], "must be [\"poll\""),
    ([["poll", {"0": "x"}]], "must map to a list"),
    ([["poll", {"0": [[0]]}]], "expected [offset, value]"),
    ([["poll", {"0": [[0, None]]}]], "polled value must be"),
    ([["poll", {"0": [["a", 1]]}]], "offset must be an integer"),
])
def test_an_ok_poll_without_the_contracts_shape_is_rejected_naming_its_line(tmp_path, bad_poll, says):
    lines = list(VALID) + [json.dumps({"index": 100, "time": 10**12, "process": 9, "type": "invoke", "f": "poll",
                                       "value": [["poll"]]}),
                           json.dumps({"index": 101, "time": 10**12 + 1, "process": 9, "type": "ok", "f": "poll",
                                       "value": bad_poll})]
    msg = rejected(check(write(tmp_path, lines)), len(lines))
    assert says in msg


def test_a_malformed_ok_send_no_longer_hides_an_acknowledgement():
    # an ok send of value 2 whose value lost its shape used to be dropped (acked 2 -> 1), and
    # the history stayed valid; now it is bad input
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},
           {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 2]]},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, {"offset": 1, "value": 2}]]}]
    with pytest.raises(HistoryError, match=r"op 3 \(index 3\): ok send: micro-op 0"):
        check_kafka(ops)


def test_info_and_fail_ops_may_carry_what_they_could_not_know():
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
           {"process": 0, "type": "info", "f": "send", "value": [["send", 0, [None, 1]]], "error": "timeout"},
           {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
           {"process": 1, "type": "fail", "f": "poll", "value": None},
           {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
           {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]]}]
    assert check_kafka(ops)["valid"] is True


def test_duplicate_indices_are_rejected_naming_the_line(tmp_path):
    lines = [json.loads(x) for x in VALID]
    lines[4]["index"] = lines[3]["index"]
    msg = rejected(check(write(tmp_path, lines)), 5)
    assert "duplicate index" in msg


def test_duplicate_indices_are_rejected_for_the_linearizability_models_too(tmp_path):
    p = tmp_path / "h.edn"
    p.write_text("{:process 0, :type :invoke, :f :write, :value 1, :index 0}\n"
                 "{:process 0, :type :ok, :f :write, :value 1, :index 0}\n")
    out = check(p, "--model", "register")
    rejected(out, 2)


def test_an_empty_history_is_not_valid_and_stderr_says_why(tmp_path):
    out = check(write(tmp_path, []))
    assert out.returncode == 1, out.stderr
    r = json.loads(out.stdout)
    assert r["valid"] is False and list(r["anomalies"]) == ["empty-transaction-graph"]
    (msg,) = out.stderr.splitlines()
    assert "nothing to check" in msg and "empty-transaction-graph" in msg


def test_a_history_of_only_failed_sends_has_nothing_to_check(tmp_path):
    lines = [{"index": 0, "process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
             {"index": 1, "process": 0, "type": "fail", "f": "send", "value": [["send", 0, 1]]},
             {"index": 2, "process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 2]]},
             {"index": 3, "process": 0, "type": "fail", "f": "send", "value": [["send", 0, 2]]}]
    out = check(write(tmp_path, lines))
    assert out.returncode == 1 and "nothing to check" in out.stderr


def test_an_empty_history_is_unknown_for_the_linearizability_models(tmp_path):
    out = check(write(tmp_path, []), "--model", "register")
    assert out.returncode == 3
    assert json.loads(out.stdout)["valid"] == "unknown"
    assert "nothing to check" in out.stderr
    assert check_linearizable([], "register")["valid"] == "unknown"
