"""check_kafka as a whole: the verdict, stats, inputs, limits and bad input."""
import json
from pathlib import Path

import pytest

from checker.history import HistoryError, Op
from checker.kafka import check_kafka

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"


def test_valid_history_is_valid_with_its_stats():
    r = check_kafka(DATA / "valid.jsonl")
    assert r["valid"] is True and r["anomalies"] == {} and r["allowed"] == {}
    s = r["stats"]
    assert s["ops"] == 12
    assert s["by_type"] == {"invoke": 6, "ok": 3, "fail": 0, "info": 3}
    assert s["by_f"]["send"] == {"invoke": 3, "ok": 2, "info": 1}
    assert s["records"] == {"sent": 3, "acked": 2, "failed": 0, "indefinite": 1, "read": 2,
                            "read_records": 2, "unseen": 0}
    assert s["errors"] == {"NOT_LEADER_OR_FOLLOWER": 1}
    assert s["anomaly_counts"] == {}


def test_ops_in_memory_give_the_same_result_as_the_file():
    lines = [json.loads(x) for x in (DATA / "lost-write.jsonl").read_text().splitlines()]
    ops = [Op(index=d["index"], process=d["process"], type=d["type"], f=d["f"], value=d["value"])
           for d in lines]
    a, b = check_kafka(ops), check_kafka(DATA / "lost-write.jsonl")
    a["stats"].pop("elapsed_s"), b["stats"].pop("elapsed_s")
    assert a == b and a["valid"] is False


def test_edn_history_reads_like_its_jsonl_twin(tmp_path):
    pytest.importorskip("checker.formats")
    edn = tmp_path / "dup.edn"
    edn.write_text(
        "{:index 0, :type :invoke, :process 0, :f :send, :value [[:send 0 1]]}\n"
        "{:index 1, :type :ok, :process 0, :f :send, :value [[:send 0 [0 1]]]}\n"
        "{:index 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}\n"
        "{:index 3, :type :ok, :process 1, :f :poll, :value [[:poll {0 [[0 1] [1 1]]}]]}\n")
    r = check_kafka(edn)
    (w,) = r["anomalies"]["duplicate"]
    assert w["offsets"] == [0, 1] and [o["index"] for o in w["ops"]] == [1, 3]


def test_time_limit_gives_unknown_and_claims_nothing():
    r = check_kafka(DATA / "duplicate.jsonl", time_limit=0)
    assert r["valid"] == "unknown" and r["anomalies"] == {}
    assert "time limit" in r["stats"]["reason"]


def test_witnesses_are_capped_but_counted():
    ops = []
    for i in range(10):          # ten failed sends, each read: ten G1a
        ops += [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, i]]},
                {"process": 0, "type": "fail", "f": "send", "value": [["send", 0, i]]}]
    ops += [{"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
            {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[i, i] for i in range(10)]}]]}]
    r = check_kafka(ops, cap=3)
    assert len(r["anomalies"]["G1a"]) == 3
    assert r["stats"]["anomaly_counts"] == {"G1a": 10}


def test_malformed_line_raises_naming_the_line(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_text('{"index":0,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}\n\n{"index": 1, oops\n')
    with pytest.raises(HistoryError, match="line 3"):
        check_kafka(p)
    p.write_text('{"index":0,"process":0,"type":"begin","f":"poll"}\n')
    with pytest.raises(HistoryError, match="line 1: type must be"):
        check_kafka(p)


def test_a_one_shot_iterator_is_refused():
    with pytest.raises(ValueError, match="re-iterable"):
        check_kafka(iter([]))
