"""Say why (checker.explain): the settings in force that permit each anomaly, from run.json."""
import json
import subprocess
import sys

import pytest

from checker.explain import explain
from eoslab import kafka_version

pytestmark = pytest.mark.fast


def run(client="eoslab", version="4.0", settings=None, workload="queue"):
    return {"client": client, "kafka_version": version, "workload": workload, "settings": settings or {},
            "kafka_behaviour": kafka_version.get(version).as_dict()}


def test_a_librdkafka_producer_left_at_its_default_duplicating_is_told_idempotence_is_off():
    (r,) = explain(["duplicate"], run(client="confluent-kafka"))["duplicate"]
    assert (r["setting"], r["value"], r["source"]) == ("enable.idempotence", "false", "client default")
    assert r["scenario"] == "restart-without-transactional-id"


def test_the_labs_client_takes_its_releases_default_idempotence():
    assert explain(["duplicate"], run(version="2.5"))["duplicate"][0]["source"] == "client default"
    assert explain(["duplicate"], run(version="4.0")) == {}        # idempotent by default from 3.0
    assert explain(["duplicate"], run(version="4.0", settings={"enable.idempotence": "false"}))[
        "duplicate"][0]["source"] == "set"


def test_more_in_flight_than_the_brokers_cache_explains_a_duplicate_of_an_idempotent_producer():
    why = explain(["duplicate"], run(settings={"max.in.flight.requests.per.connection": "6"}))
    assert [r["setting"] for r in why["duplicate"]] == ["max.in.flight.requests.per.connection"]


def test_acks_1_and_unclean_election_explain_lost_writes():
    why = explain(["lost-write"], run(settings={"acks": "1", "topic.unclean.leader.election.enable": "true"}))
    assert [r["setting"] for r in why["lost-write"]] == ["acks", "unclean.leader.election.enable"]


def test_releases_before_kip_890_explain_g1a_and_hangs_and_4_0_does_not():
    why = explain(["G1a", "hanging-transaction"], run(version="3.0", workload="txn"))
    assert why["G1a"][0]["scenario"] == "delayed-end-txn"
    assert why["hanging-transaction"][0]["scenario"] == "hanging-late-produce"
    assert "hanging-transaction" not in explain(["hanging-transaction"], run(version="3.6", workload="txn"))
    assert explain(["G1a", "hanging-transaction"], run(version="4.0", workload="txn")) == {}


def test_nothing_is_guessed():
    assert explain(["G0", "duplicate"], run(workload="txn")) == {}     # transactional: idempotent
    assert explain(["duplicate"], None) == {}
    assert explain([], run(client="confluent-kafka")) == {}


def test_eoslab_check_writes_why_into_results_and_the_report(tmp_path):
    from pipeline import synth
    d = tmp_path / "r"
    synth.write_run(str(d), n_ops=300, seed=4, inject={"duplicate": 1}, nemesis=["lost-ack"])
    meta = json.loads((d / "run.json").read_text())
    meta.update(client="confluent-kafka", kafka_version="3.6")
    (d / "run.json").write_text(json.dumps(meta))
    p = subprocess.run([sys.executable, "-m", "eoslab", "check", str(d / "history.jsonl"), "--out", str(d)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 1, p.stderr
    result = json.loads((d / "results.json").read_text())
    assert result["why"]["duplicate"][0]["setting"] == "enable.idempotence"
    assert "Why these settings permit it" in (d / "report.html").read_text()
