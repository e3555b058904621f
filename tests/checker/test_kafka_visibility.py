"""Visibility anomalies: lost-write, G1a, precommitted-read, and unseen records."""
import json
from pathlib import Path

import pytest

from checker.kafka import check_kafka

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"


def only(result, kind):
    assert result["valid"] is False
    assert list(result["anomalies"]) == [kind], result["anomalies"]
    (w,) = result["anomalies"][kind]
    return w


def test_lost_write_is_the_unread_record_below_the_highest_read():
    # offsets 0,1,2 acknowledged; pollers returned offsets 0 and 2, nobody returned offset 1
    w = only(check_kafka(DATA / "lost-write.jsonl"), "lost-write")
    assert (w["key"], w["value"], w["offset"]) == (0, 2, 1)
    assert w["writer"] == 3
    assert w["max_read_offset"] == 2 and w["max_read"] == 9
    assert [o["index"] for o in w["ops"]] == [3, 9]


def test_unread_records_above_the_highest_read_are_unseen_not_lost():
    # drop the poll of offset 2: records at 1 and 2 are merely unseen
    lines = (DATA / "lost-write.jsonl").read_text().splitlines()[:-2]
    r = check_kafka([json.loads(x) for x in lines])
    assert r["valid"] is True
    assert r["stats"]["unseen"]["count"] == 2
    assert r["stats"]["unseen"]["values"] == {0: [2, 3]}


def test_strict_unseen_makes_unseen_records_an_anomaly():
    lines = (DATA / "lost-write.jsonl").read_text().splitlines()[:-2]
    ops = [json.loads(x) for x in lines]
    r = check_kafka(ops, strict_unseen=True)
    assert r["valid"] is False
    (w,) = r["anomalies"]["unseen"]
    assert w["count"] == 2 and w["values"] == [2, 3]


def test_g1a_names_the_failed_writer_and_the_reader():
    w = only(check_kafka(DATA / "g1a.jsonl"), "G1a")
    assert (w["key"], w["value"], w["offset"]) == (0, 1, 0)
    assert (w["writer"], w["reader"]) == (1, 3)
    assert [o["type"] for o in w["ops"]] == ["fail", "ok"]


def test_precommitted_read_names_the_op_and_offset():
    w = only(check_kafka(DATA / "precommitted-read.jsonl"), "precommitted-read")
    assert (w["key"], w["value"], w["offset"], w["op"]) == (0, 1, 0, 1)
    assert w["ops"][0]["index"] == 1


def test_precommitted_read_at_read_uncommitted_is_allowed():
    ops = [json.loads(x) for x in (DATA / "precommitted-read.jsonl").read_text().splitlines()]
    ops[1]["isolation"] = "read_uncommitted"
    r = check_kafka(ops)
    assert r["valid"] is True
    assert r["allowed"]["precommitted-read"][0]["op"] == 1


def test_info_write_counts_as_committed_only_when_some_of_it_was_read():
    # an info send with a known offset below the highest read is lost only if it provably committed
    base = [
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1], ["send", 1, 9]]},
        {"process": 0, "type": "info", "f": "send", "value": [["send", 0, [0, 1]], ["send", 1, [0, 9]]]},
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 2]]},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [1, 2]]]},
        {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[1, 2]]}]]},
    ]
    assert check_kafka(base)["valid"] is True          # info, nothing of it read: maybe never written
    seen = base + [{"process": 2, "type": "invoke", "f": "poll", "value": [["poll"]]},
                   {"process": 2, "type": "ok", "f": "poll", "value": [["poll", {"1": [[0, 9]]}]]}]
    r = check_kafka(seen)
    (w,) = r["anomalies"]["lost-write"]
    assert (w["key"], w["value"], w["offset"], w["writer"]) == (0, 1, 0, 1)
