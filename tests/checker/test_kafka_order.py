"""Order anomalies: poll-skip, nonmonotonic-poll/send and their int- forms."""
import json
from pathlib import Path

import pytest

from checker.kafka import check_kafka

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"


def load(name):
    return [json.loads(x) for x in (DATA / name).read_text().splitlines() if x.strip()]


def only(result, kind):
    assert result["valid"] is False
    assert list(result["anomalies"]) == [kind], result["anomalies"]
    (w,) = result["anomalies"][kind]
    return w


def test_poll_skip_names_both_polls_and_the_skipped_record():
    # process 5 polls offset 0, then offset 2: offset 1 (value 2) exists and was skipped
    w = only(check_kafka(DATA / "poll-skip.jsonl"), "poll-skip")
    assert w["key"] == 0 and w["offsets"] == [0, 2] and w["values"] == [1, 3]
    assert [o["index"] for o in w["ops"]] == [5, 7]
    assert w["skipped"] == [2] and w["delta"] == 2


def test_poll_skip_of_a_subscribed_consumer_is_allowed():
    ops = load("poll-skip.jsonl")
    ops[2]["f"] = ops[3]["f"] = "subscribe"
    r = check_kafka(ops)
    assert r["valid"] is True
    assert r["allowed"]["poll-skip"][0]["offsets"] == [0, 2]


def test_a_gap_holding_no_known_record_is_not_a_skip():
    # offsets 0 and 2 with nothing known at 1 (a transaction marker): no skip
    ops = [
        {"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1], ["send", 0, 3]]},
        {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]], ["send", 0, [2, 3]]]},
        {"process": 5, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"process": 5, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]]},
        {"process": 5, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"process": 5, "type": "ok", "f": "poll", "value": [["poll", {"0": [[2, 3]]}]]},
    ]
    assert check_kafka(ops)["valid"] is True


def test_nonmonotonic_poll_names_the_two_polls():
    # process 5 read up to offset 1, then started again at offset 1
    w = only(check_kafka(DATA / "nonmonotonic-poll.jsonl"), "nonmonotonic-poll")
    assert w["key"] == 0 and w["offsets"] == [1, 1] and w["values"] == [2, 2]
    assert [o["index"] for o in w["ops"]] == [3, 5]
    assert w["delta"] == 0


def test_nonmonotonic_send_names_the_two_sends():
    w = only(check_kafka(DATA / "nonmonotonic-send.jsonl"), "nonmonotonic-send")
    assert w["key"] == 0 and w["offsets"] == [1, 0] and w["values"] == [1, 2]
    assert [o["index"] for o in w["ops"]] == [1, 3]


def test_int_poll_skip_names_the_op_and_the_skipped_record():
    w = only(check_kafka(DATA / "int-poll-skip.jsonl"), "int-poll-skip")
    assert w["op"] == 3 and w["offsets"] == [0, 2] and w["skipped"] == [2]
    assert [o["index"] for o in w["ops"]] == [3]


def test_int_poll_skip_on_a_rebalanced_key_is_not_reported():
    ops = load("int-poll-skip.jsonl")
    ops[3]["rebalance-log"] = [{"keys": [0]}]
    assert check_kafka(ops)["valid"] is True


def test_int_nonmonotonic_poll_names_the_op_and_offsets():
    w = only(check_kafka(DATA / "int-nonmonotonic-poll.jsonl"), "int-nonmonotonic-poll")
    assert w["op"] == 3 and w["offsets"] == [1, 0] and w["values"] == [2, 1]
    assert w["delta"] == -1


def test_int_send_skip_is_reported_but_allowed():
    # a transaction's two sends to key 0 land at 0 and 2, another producer's record at 1
    r = check_kafka(DATA / "int-send-skip.jsonl")
    assert r["valid"] is True and r["anomalies"] == {}
    (w,) = r["allowed"]["int-send-skip"]
    assert w["op"] == 3 and w["offsets"] == [0, 2] and w["skipped"] == [2]
    assert "allowed" in w


def test_int_nonmonotonic_send_names_the_op_and_offsets():
    w = only(check_kafka(DATA / "int-nonmonotonic-send.jsonl"), "int-nonmonotonic-send")
    assert w["op"] == 1 and w["offsets"] == [1, 0] and w["values"] == [1, 2]
