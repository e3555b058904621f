"""Scenarios from Jepsen's own Kafka checker tests, held against ours.

The histories restate cases of jepsen.tests.kafka-test (offsets that only an
info send's later visibility makes inconsistent, lost writes with conflicting
offsets or crashed sends, poll skips over marker gaps); the expectations are
Jepsen's.
"""
import pytest

from checker.kafka import check_kafka

pytestmark = pytest.mark.fast


def o(index, process, type_, f, value):
    return {"index": index, "time": index, "process": process, "type": type_, "f": f, "value": value}


def test_info_send_offsets_count_once_the_send_is_known_to_have_committed():
    base = [o(0, 0, "invoke", "send", [["send", "x", 1], ["send", "y", 1]]),
            o(1, 0, "info", "send", [["send", "x", [0, 1]], ["send", "y", 1]]),
            o(2, 1, "invoke", "send", [["send", "x", 2]]),
            o(3, 1, "ok", "send", [["send", "x", [0, 2]]])]
    assert "inconsistent-offsets" not in check_kafka(base)["anomalies"]
    seen = base + [o(4, 2, "invoke", "poll", [["poll"]]), o(5, 2, "ok", "poll", [["poll", {"y": [[5, 1]]}]])]
    (w,) = check_kafka(seen)["anomalies"]["inconsistent-offsets"]
    assert (w["key"], w["offset"], w["values"]) == ("x", 0, [1, 2])


def test_lost_writes_below_a_read_of_an_info_send():
    h = [o(0, 0, "invoke", "send", [["send", "x", "a"]]), o(1, 0, "ok", "send", [["send", "x", [0, "a"]]]),
         o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "d"]]),
         o(3, 0, "ok", "send", [["send", "x", [1, "b"]], ["send", "x", [3, "d"]]]),
         o(4, 1, "invoke", "send", [["send", "x", "c"]]), o(5, 1, "info", "send", [["send", "x", "c"]]),
         o(6, 0, "invoke", "poll", [["poll"]]), o(7, 0, "ok", "poll", [["poll", {"x": [[2, "c"]]}]])]
    lost = check_kafka(h)["anomalies"]["lost-write"]
    assert [(w["value"], w["offset"], w["writer"], w["max_read"]) for w in lost] == [("a", 0, 1, 7), ("b", 1, 3, 7)]


def test_lost_write_overwritten_at_its_offset():
    h = [o(0, 0, "invoke", "send", [["send", "x", "a"]]), o(1, 0, "ok", "send", [["send", "x", [0, "a"]]]),
         o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "c"]]),
         o(3, 0, "ok", "send", [["send", "x", [0, "b"]], ["send", "x", [2, "c"]]]),
         o(4, 0, "invoke", "poll", [["poll"]]), o(5, 0, "ok", "poll", [["poll", {"x": [[0, "b"], [2, "c"]]}]])]
    r = check_kafka(h)
    (w,) = r["anomalies"]["lost-write"]
    assert (w["value"], w["offset"], w["writer"], w["max_read"]) == ("a", 0, 1, 5)
    assert r["anomalies"]["inconsistent-offsets"][0]["values"] == ["a", "b"]


def test_a_crashed_send_is_lost_only_once_another_of_its_records_was_read():
    h = [o(0, 0, "invoke", "send", [["send", "x", "a"], ["send", "y", "b"]]),
         o(1, 0, "info", "send", [["send", "x", "a"], ["send", "y", [0, "b"]]]),
         o(2, 1, "invoke", "send", [["send", "y", "c"]]), o(3, 1, "info", "send", [["send", "y", "c"]])]
    poll_a = [o(4, 2, "invoke", "poll", [["poll"]]), o(5, 2, "ok", "poll", [["poll", {"x": [[0, "a"]]}]])]
    poll_c = [o(6, 3, "invoke", "poll", [["poll"]]), o(7, 3, "ok", "poll", [["poll", {"y": [[1, "c"]]}]])]
    assert "lost-write" not in check_kafka(h + poll_c)["anomalies"]
    (w,) = check_kafka(h + poll_a + poll_c)["anomalies"]["lost-write"]
    assert (w["key"], w["value"], w["offset"], w["writer"], w["max_read"]) == ("y", "b", 0, 1, 7)


def test_poll_skips_count_known_records_only():
    # process 0 polls 1-2, then 4, then 7; 3 and 6 are known to exist, 5 is a gap
    h = [o(0, 0, "invoke", "poll", [["poll"]]), o(1, 0, "ok", "poll", [["poll", {"x": [[1, "a"], [2, "b"]]}]]),
         o(2, 1, "invoke", "poll", [["poll"]]), o(3, 1, "ok", "poll", [["poll", {"x": [[3, "c"]]}]]),
         o(6, 0, "invoke", "poll", [["poll"]]), o(7, 0, "ok", "poll", [["poll", {"x": [[4, "d"]]}]]),
         o(10, 2, "invoke", "send", [["send", "x", "f"]]), o(11, 2, "ok", "send", [["send", "x", [6, "f"]]]),
         o(12, 0, "invoke", "poll", [["poll"]]), o(13, 0, "ok", "poll", [["poll", {"x": [[7, "g"]]}]])]
    skips = check_kafka(h)["anomalies"]["poll-skip"]
    assert [([op["index"] for op in w["ops"]], w["delta"], w["skipped"]) for w in skips] == \
        [([1, 7], 2, ["c"]), ([7, 13], 2, ["f"])]
