"""`eoslab check` and report.html on a run the lab broke: the verdict lab-error (exit 4), never valid and
never anomalies; what the checker found is shown as unconfirmed, under a banner saying it is not about Kafka."""
from __future__ import annotations

import json

import pytest

from checker.report import render_report
from checker.result import with_verdict
from pipeline import synth

pytestmark = pytest.mark.fast

ERR = {"kind": "traceback", "node": "broker-2", "message": "broker-2 logged a traceback: KeyError: ('t', 0)",
       "log": ["2026-11-25 10:00:06,000 broker-2 ERROR x: produce failed", "Traceback (most recent call last):",
               "KeyError: ('t', <0>)"]}


def _check(tmp_path, capsys, lab_errors, inject):
    from eoslab.cli import main
    d = tmp_path / "run"
    synth.write_run(str(d), n_ops=300, seed=2, inject=inject, nemesis=["kill"], lab_errors=lab_errors)
    rc = main(["check", str(d / "history.jsonl"), "--out", str(d)])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err, d


def test_check_of_a_broken_run_with_anomalies_is_lab_error_and_they_are_unconfirmed(tmp_path, capsys):
    rc, printed, err, d = _check(tmp_path, capsys, [ERR], {"duplicate": 1})
    assert rc == 4
    results = json.loads((d / "results.json").read_text())
    assert results == printed and results["verdict"] == "lab-error" and results["valid"] == "unknown"
    assert results["lab_errors"] == [ERR] and results["anomalies"] == {}
    assert set(results["unconfirmed"]) == {"duplicate"}
    assert "lab-error" in err and "broker-2" in err
    html = (d / "report.html").read_text()
    assert "LAB ERROR: this run's verdict is not about Kafka" in html
    assert "Unconfirmed anomalies" in html and "id='duplicate'" in html
    assert "<h2>Anomalies</h2>" not in html and ">INVALID<" not in html and ">VALID<" not in html
    assert "KeyError: (&#x27;t&#x27;, &lt;0&gt;)" in html                 # the log lines, escaped


def test_check_of_a_broken_valid_looking_run_is_not_valid(tmp_path, capsys):
    rc, printed, _, d = _check(tmp_path, capsys, [ERR], {})
    assert rc == 4 and printed["verdict"] == "lab-error" and printed["valid"] != True    # noqa: E712
    rc, printed, _, d = _check(tmp_path / "clean", capsys, None, {})
    assert rc == 0 and printed["verdict"] == "valid" and "lab_errors" not in printed
    assert "LAB ERROR" not in (d / "report.html").read_text()


def test_report_banner_lists_every_lab_error_with_where_it_happened():
    r = with_verdict({"valid": True, "anomalies": {}, "stats": {}},
                     [ERR, {"kind": "thread", "thread": "client-3", "message": "ValueError: x", "log": []}])
    html = render_report(r, title="t")
    assert html.index("LAB ERROR") < html.index("Statistics")
    assert "node broker-2" in html and "thread client-3" in html and "ValueError: x" in html
    assert "class='verdict laberror'" in html
