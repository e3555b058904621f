"""An app run's note on its own client's KIP-447 fault (cluster.apps.client_faults): made only from a count
above zero, attached to results.json and report.html beside the checker's verdict without changing it, and
put there by the app run's last step."""
import json
from types import SimpleNamespace

import pytest

from checker.report_app import write_app_report
from checker.result import write_results
from cluster.apps.client_faults import KIND, attach_notes, client_fault_notes
from checker import cli as check_cli
from cluster.apps.run import _AppRun
from cluster.run_judging import write_meta
from tests.checker.test_app_check import copier

pytestmark = pytest.mark.fast
RESULT = {"verdict": "invalid", "valid": False,
          "anomalies": {"duplicate": [{"value": "k1-7", "offsets": ["out-0@3", "out-0@9"]}]},
          "stats": {"anomaly_counts": {"duplicate": 1}, "input_acknowledged": 10, "output_records": 11}}


def reading(count, client_ids=("aiokafka-0.14.0",), unread=()):
    return {"count": count, "client_ids": list(client_ids), "brokers": ["broker-1", "broker-2"],
            "unread": list(unread)}


@pytest.mark.parametrize("r", [None, {}, {"error": "RpcError: unavailable"}, reading(0), reading(0, unread=["b"]),
                               {"count": "3"}])
def test_no_count_above_zero_makes_no_note(r):
    assert client_fault_notes(r) == []


def test_a_count_names_the_client_the_fault_and_that_kafka_is_not_to_blame():
    [n] = client_fault_notes(reading(3))
    assert (n["kind"], n["count"], n["client_ids"]) == (KIND, 3, ["aiokafka-0.14.0"])
    text = n["note"]
    for part in ("without require_stable at least 3 times", "KIP-447", "client id aiokafka-0.14.0",
                 "the client's, not Kafka's", "aiokafka does not support require_stable"):
        assert part in text
    assert "could not be read" not in text


def test_another_client_is_not_said_to_be_aiokafka_and_unread_brokers_are_named():
    [n] = client_fault_notes(reading(1, client_ids=["my-app"], unread=["broker-3"]))
    assert "1 time while" in n["note"] and "client id my-app" in n["note"]
    assert "aiokafka" not in n["note"]
    assert "broker-3 could not be read" in n["note"]
    [n] = client_fault_notes(reading(2, client_ids=[]))
    assert "client id" not in n["note"]


def judged(tmp_path):
    out = str(tmp_path)
    write_results(out, RESULT)
    write_app_report(str(tmp_path / "report.html"), RESULT, None, title="copier <x>")
    return out


def test_the_note_is_attached_beside_an_unchanged_verdict(tmp_path):
    out = judged(tmp_path)
    notes = client_fault_notes(reading(4, client_ids=["aiokafka<&>"]))
    assert attach_notes(out, notes)
    got = json.load(open(tmp_path / "results.json"))
    assert got.pop("client_faults") == notes
    assert got == RESULT                                    # verdict, anomalies, stats as the checker wrote
    page = (tmp_path / "report.html").read_text()
    assert "aiokafka&lt;&amp;&gt;" in page and "aiokafka<&>" not in page
    assert page.index("class='verdict invalid'") < page.index("without require_stable") < page.index(
        "<h2>Anomalies</h2>")
    assert page.count("<html") == 1 and page.rstrip().endswith("</html>")


def test_no_note_changes_nothing(tmp_path):
    out = judged(tmp_path)
    before = ((tmp_path / "results.json").read_bytes(), (tmp_path / "report.html").read_bytes())
    assert not attach_notes(out, client_fault_notes(reading(0)))
    assert not attach_notes(str(tmp_path / "nothing-here"), client_fault_notes(reading(2)))
    assert ((tmp_path / "results.json").read_bytes(), (tmp_path / "report.html").read_bytes()) == before


@pytest.mark.parametrize("count", [0, 5])
def test_the_app_runs_last_step_puts_the_note_in_run_json_and_every_check_carries_it(tmp_path, capsys, count):
    out = str(tmp_path)
    r = copier(10)
    r.final()
    r.audit()
    with open(tmp_path / "history.jsonl", "w") as f:
        f.writelines(json.dumps(op) + "\n" for op in r.ops)
    meta = {"kind": "app", "unstable_offset_fetches": reading(count)}
    run = _AppRun(SimpleNamespace(out=out), [], meta, None, log=None)
    notes = run._client_faults()
    write_meta(out, meta)
    for _ in range(2):                    # the run's own check, then a hand re-run of `eoslab check`
        args = SimpleNamespace(history=str(tmp_path / "history.jsonl"), format="auto", model="kafka",
                               initial=None, out=out, time_limit=None, no_partition=False, hang_threshold_s=None)
        assert check_cli.run(args) == 0
        results = json.load(open(tmp_path / "results.json"))
        page = (tmp_path / "report.html").read_text()
        assert results["verdict"] == "valid"
        if count:
            assert results["client_faults"] == notes == json.load(open(tmp_path / "run.json"))["client_faults"]
            assert results["client_faults"][0]["count"] == 5
            assert page.count("The application's client") == 1
            assert page.index("class='verdict valid'") < page.index("without require_stable")
        else:
            assert notes == [] and "client_faults" not in results and "The application's client" not in page
    assert ("client fault: the application's consumer" in capsys.readouterr().out) == bool(count)
