"""Version-order anomalies: inconsistent-offsets and duplicate, from hand-written histories."""
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


def test_inconsistent_offsets_names_both_claimants():
    # p0 and p1 were both told their record sits at offset 0 of key 0; two pollers agree with each
    w = only(check_kafka(DATA / "inconsistent-offsets.jsonl"), "inconsistent-offsets")
    assert w["key"] == 0 and w["offset"] == 0
    assert w["values"] == [1, 2]
    assert w["claimed_by"] == [1, 3]
    assert [o["index"] for o in w["ops"]] == [1, 3]
    assert w["ops"][1]["value"] == [["send", 0, [0, 2]]]


def test_duplicate_lists_every_offset_of_the_value():
    # value 1 was sent once (offset 0) but a poll returns it at offsets 0 and 1
    w = only(check_kafka(DATA / "duplicate.jsonl"), "duplicate")
    assert w["key"] == 0 and w["value"] == 1
    assert w["offsets"] == [0, 1] and w["count"] == 2
    assert [o["index"] for o in w["ops"]] == [1, 3]


def test_string_and_int_spellings_of_a_key_are_one_partition():
    # sends name key 0, polls name "0" (JSON object keys): no phantom anomalies between them
    ops = [
        {"index": 0, "process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]]},
        {"index": 1, "process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]]},
        {"index": 2, "process": 1, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"index": 3, "process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]]},
    ]
    r = check_kafka(ops)
    assert r["valid"] is True
    assert r["stats"]["keys"] == 1
    assert r["stats"]["records"]["read"] == 1
