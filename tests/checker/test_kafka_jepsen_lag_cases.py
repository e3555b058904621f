"""Cases of Jepsen's own Kafka checker tests (jepsen.tests.kafka-test) about what a history gives to
analyse, unseen records and realtime lag, held against ours (the histories restated as in
test_kafka_jepsen_cases.py, whose helpers they use)."""
import pytest

from checker.kafka import check_kafka
from tests.checker.test_kafka_jepsen_cases import h

pytestmark = pytest.mark.fast


# ------------------------------------------------------------------ nothing to analyse, unseen

def test_a_history_with_nothing_to_analyse_is_not_valid():
    # empty-history-test: only an assign; Jepsen's checker reports :empty-transaction-graph
    r = check_kafka(h((0, "invoke", "assign", ["x"]), (0, "ok", "assign", ["x"])))
    assert r["valid"] is False and list(r["anomalies"]) == ["empty-transaction-graph"]
    assert check_kafka([])["valid"] is False


def test_one_send_and_a_poll_that_reads_it_is_something_to_analyse():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "a"]]), (1, "invoke", "poll", [["poll"]]),
                      (0, "ok", "send", [["send", "x", [0, "a"]]]), (1, "ok", "poll", [["poll", {"x": [[0, "a"]]}]])))
    assert r["valid"] is True


def test_concurrent_ok_ops_that_see_nothing_of_each_other_are_nothing_to_analyse():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "a"]]), (1, "invoke", "poll", [["poll"]]),
                      (0, "ok", "send", [["send", "x", [0, "a"]]]), (1, "ok", "poll", [["poll", {}]])))
    assert r["valid"] is False and list(r["anomalies"]) == ["empty-transaction-graph"]


def test_unseen_records_are_counted_in_stats():
    # unseen-test: a and b sent, a polled, then b; nothing is unseen at the end. (The lab reports
    # unseen records in stats; Jepsen counts any left at the end as an error, see visibility.)
    ops = h((0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {}]]),
            (0, "invoke", "send", [["send", "x", "a"], ["send", "x", "b"]]),
            (0, "ok", "send", [["send", "x", [0, "a"]], ["send", "x", [1, "b"]]]),
            (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[0, "a"]]}]]))
    assert check_kafka(ops)["stats"]["unseen"]["by_key"] == {"x": 1}
    ops += h(*[(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[1, "b"]]}]])])
    ops[-2]["index"], ops[-1]["index"] = 6, 7
    r = check_kafka(ops)
    assert r["valid"] is True and r["stats"]["unseen"]["count"] == 0


# ------------------------------------------------------------------ realtime lag

MS = 1_000_000     # Jepsen's test counts time in ns and index; here one index is one ms


def lag_history():
    """realtime-lag-test, "up to date": process 0 assigns, polls, falls behind, reassigns, catches up."""
    ops = [(0, "invoke", "assign", ["x"]), (0, "ok", "assign", ["x"]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": []}]]),
           (0, "invoke", "send", [["send", "x", "a"]]), (0, "ok", "send", [["send", "x", [0, "a"]]]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": []}]]),
           (1, "invoke", "send", [["send", "x", "c"], ["send", "x", "d"]]),
           (1, "ok", "send", [["send", "x", [2, "c"]], ["send", "x", [3, "d"]]]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll"]]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[0, "a"], [1, "b"]]}]]),
           (0, "invoke", "assign", ["x", "y"]), (0, "ok", "assign", ["x", "y"]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {}]]),
           (0, "invoke", "assign", ["y"]), (0, "ok", "assign", ["y"]),
           (0, "invoke", "assign", ["x"]), (0, "ok", "assign", ["x"]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {}]]),
           (0, "invoke", "poll", [["poll"], ["poll"]]),
           (0, "ok", "poll", [["poll", {"x": [[0, "a"], [1, "b"]]}], ["poll", {"x": [[2, "c"], [3, "d"]]}]]),
           (1, "invoke", "send", [["send", "x", "b"]]), (1, "info", "send", [["send", "x", "b"]])]
    hist = h(*ops)
    for d in hist:
        d["time"] = d["index"] * MS
    return hist


def test_realtime_lag_per_poll_and_key_as_jepsen_computes_it():
    from checker.kafka.state import Collector
    c = Collector()
    c.run(lag_history())
    assert [(t // MS, k, lag // MS) for t, k, lag in c.lag.samples()] == \
        [(2, "x", 0), (6, "x", 1), (10, "x", 5), (12, "x", 3), (16, "x", 7), (16, "y", 0), (22, "x", 17),
         (24, "x", 0)]


def test_realtime_lag_summary_in_the_result():
    lag = check_kafka(lag_history())["realtime_lag"]
    assert lag["max_ms"] == 17 and lag["samples"] == 8
    assert lag["worst"] == {"time_s": 0.022, "process": 0, "key": "x", "lag_ms": 17}
    assert lag["per_key"] == {"x": {"max_ms": 17, "p99_ms": 17, "samples": 7},
                              "y": {"max_ms": 0, "p99_ms": 0, "samples": 1}}
    assert max(ms for _, ms in lag["series"]) == 17


def test_a_history_without_times_has_no_realtime_lag():
    hist = lag_history()
    for d in hist:
        del d["time"]
    assert check_kafka(hist)["realtime_lag"]["max_ms"] is None
