"""Cases of Jepsen's own Kafka checker tests (jepsen.tests.kafka-test), held against ours.

Each history restates one case of jepsen/test/jepsen/tests/kafka_test.clj
(keywords become strings, keys :x/:y become "x"/"y", indices are the op's
position, times its index as in Jepsen's `o`); the expectations are Jepsen's.
Jepsen lists allowed anomalies among its errors; here they sit under
"allowed", so `found` looks in both. Where the lab deliberately differs
(unseen records are stats, not errors), the test says so.
"""
import pytest

from checker.kafka import check_kafka

pytestmark = pytest.mark.fast


def o(index, process, type_, f, value):
    return {"index": index, "time": index, "process": process, "type": type_, "f": f, "value": value}


def h(*ops):
    """A history from (process, type, f, value) tuples, indexed densely as Jepsen's h/history does."""
    return [o(i, *op) for i, op in enumerate(ops)]


def found(result, kind):
    return result["anomalies"].get(kind, []) + result["allowed"].get(kind, [])


def op_indices(w):
    return [op["index"] for op in w["ops"]]


# ------------------------------------------------------------------ version orders, offsets

def test_info_send_offsets_count_once_the_send_is_known_to_have_committed():
    base = [o(0, 0, "invoke", "send", [["send", "x", 1], ["send", "y", 1]]),
            o(1, 0, "info", "send", [["send", "x", [0, 1]], ["send", "y", 1]]),
            o(2, 1, "invoke", "send", [["send", "x", 2]]),
            o(3, 1, "ok", "send", [["send", "x", [0, 2]]])]
    assert "inconsistent-offsets" not in check_kafka(base)["anomalies"]
    seen = base + [o(4, 2, "invoke", "poll", [["poll"]]), o(5, 2, "ok", "poll", [["poll", {"y": [[5, 1]]}]])]
    (w,) = check_kafka(seen)["anomalies"]["inconsistent-offsets"]
    assert (w["key"], w["offset"], w["values"]) == ("x", 0, [1, 2])


def test_an_info_txn_known_to_have_committed_contributes_its_offsets():
    # version-orders-test: a and b read at 0 and 1; a crashed txn wrote c at 1, b at 3, d at 4,
    # and must have committed since b was read: c conflicts with b at offset 1
    r = check_kafka(h((0, "ok", "txn", [["poll", {"x": [[0, "a"], [1, "b"]]}]]),
                      (1, "info", "txn", [["send", "x", [1, "c"]], ["send", "x", [3, "b"]], ["send", "x", [4, "d"]]])))
    assert [(w["key"], w["offset"], w["values"]) for w in r["anomalies"]["inconsistent-offsets"]] == \
        [("x", 1, ["b", "c"])]
    assert [(w["value"], w["offsets"]) for w in r["anomalies"]["duplicate"]] == [("b", [1, 3])]


def test_two_acks_at_one_offset_are_inconsistent():
    # version-orders-test, "a real-world example"
    r = check_kafka(h((379, "invoke", "send", [["send", 11, 641]]), (379, "ok", "send", [["send", 11, [537, 641]]]),
                      (363, "invoke", "send", [["send", 11, 645]]), (363, "ok", "send", [["send", 11, [537, 645]]])))
    (w,) = r["anomalies"]["inconsistent-offsets"]
    assert (w["key"], w["offset"], w["values"]) == (11, 537, [641, 645])


def test_g1a_a_poll_reads_a_failed_send():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", 2], ["send", "y", 3]]),
                      (0, "fail", "send", [["send", "x", 2], ["send", "y", 3]]),
                      (1, "invoke", "poll", [["poll"]]), (1, "ok", "poll", [["poll", {"x": [[0, 2]]}]])))
    (w,) = r["anomalies"]["G1a"]
    assert (w["key"], w["value"], w["writer"], w["reader"]) == ("x", 2, 1, 3)


# ------------------------------------------------------------------ lost writes

def test_lost_writes_below_a_read_of_an_info_send():
    hist = [o(0, 0, "invoke", "send", [["send", "x", "a"]]), o(1, 0, "ok", "send", [["send", "x", [0, "a"]]]),
            o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "d"]]),
            o(3, 0, "ok", "send", [["send", "x", [1, "b"]], ["send", "x", [3, "d"]]]),
            o(4, 1, "invoke", "send", [["send", "x", "c"]]), o(5, 1, "info", "send", [["send", "x", "c"]]),
            o(6, 0, "invoke", "poll", [["poll"]]), o(7, 0, "ok", "poll", [["poll", {"x": [[2, "c"]]}]])]
    lost = check_kafka(hist)["anomalies"]["lost-write"]
    assert [(w["value"], w["offset"], w["writer"], w["max_read"]) for w in lost] == [("a", 0, 1, 7), ("b", 1, 3, 7)]


def test_lost_write_overwritten_at_its_offset():
    hist = [o(0, 0, "invoke", "send", [["send", "x", "a"]]), o(1, 0, "ok", "send", [["send", "x", [0, "a"]]]),
            o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "c"]]),
            o(3, 0, "ok", "send", [["send", "x", [0, "b"]], ["send", "x", [2, "c"]]]),
            o(4, 0, "invoke", "poll", [["poll"]]), o(5, 0, "ok", "poll", [["poll", {"x": [[0, "b"], [2, "c"]]}]])]
    r = check_kafka(hist)
    (w,) = r["anomalies"]["lost-write"]
    assert (w["value"], w["offset"], w["writer"], w["max_read"]) == ("a", 0, 1, 5)
    assert r["anomalies"]["inconsistent-offsets"][0]["values"] == ["a", "b"]


def test_a_crashed_send_is_lost_only_once_another_of_its_records_was_read():
    hist = [o(0, 0, "invoke", "send", [["send", "x", "a"], ["send", "y", "b"]]),
            o(1, 0, "info", "send", [["send", "x", "a"], ["send", "y", [0, "b"]]]),
            o(2, 1, "invoke", "send", [["send", "y", "c"]]), o(3, 1, "info", "send", [["send", "y", "c"]])]
    poll_a = [o(4, 2, "invoke", "poll", [["poll"]]), o(5, 2, "ok", "poll", [["poll", {"x": [[0, "a"]]}]])]
    poll_c = [o(6, 3, "invoke", "poll", [["poll"]]), o(7, 3, "ok", "poll", [["poll", {"y": [[1, "c"]]}]])]
    assert "lost-write" not in check_kafka(hist + poll_c)["anomalies"]
    (w,) = check_kafka(hist + poll_a + poll_c)["anomalies"]["lost-write"]
    assert (w["key"], w["value"], w["offset"], w["writer"], w["max_read"]) == ("y", "b", 0, 1, 7)


# ------------------------------------------------------------------ poll-skip

POLL_SKIP = {
    "poll-1-2": [(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[1, "a"], [2, "b"]]}]])],
    "poll-3": [(1, "invoke", "poll", [["poll"]]), (1, "ok", "poll", [["poll", {"x": [[3, "c"]]}]])],
    "poll-4": [(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[4, "d"]]}]])],
    "write-6": [(2, "invoke", "send", [["send", "x", "f"]]), (2, "ok", "send", [["send", "x", [6, "f"]]])],
    "poll-7": [(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[7, "g"]]}]])],
    "write-*": [(3, "invoke", "send", [["send", "x", v] for v in "abcdg"]),
                (3, "info", "send", [["send", "x", v] for v in "abcdg"])],
}


def poll_skip_history(*between):
    """Jepsen's poll-skip-test history; `between` = (ops after poll-3, ops after poll-4)."""
    after3, after4 = between or ([], [])
    p = POLL_SKIP
    return h(*p["poll-1-2"], *p["poll-3"], *after3, *p["poll-4"], *after4, *p["write-6"], *p["poll-7"],
             *p["write-*"])


def skips(result):
    return sorted((op_indices(w), w["delta"], w["skipped"]) for w in found(result, "poll-skip"))


def test_poll_skips_count_known_records_only():
    # process 0 polls 1-2, then 4, then 7; 3 and 6 are known to exist, 5 may be a gap
    assert skips(check_kafka(poll_skip_history())) == [([1, 5], 2, ["c"]), ([5, 9], 2, ["f"])]


def test_an_assign_or_subscribe_without_the_key_forgets_the_position_even_when_info():
    sub_y = [(0, "invoke", "subscribe", ["y"]), (0, "ok", "subscribe", ["y"])]
    assign_y_info = [(0, "invoke", "assign", ["y"]), (0, "info", "assign", ["y"])]
    assert skips(check_kafka(poll_skip_history(sub_y, assign_y_info))) == []
    # the info assign alone: it may have taken effect, so 4 -> 7 is no skip either
    assert skips(check_kafka(poll_skip_history([], assign_y_info))) == [([1, 5], 2, ["c"])]


def test_an_assign_or_subscribe_that_keeps_the_key_keeps_the_position():
    sub_xy = [(0, "invoke", "subscribe", ["x", "y"]), (0, "ok", "subscribe", ["x", "y"])]
    assign_xy = [(0, "invoke", "assign", ["x", "y"]), (0, "ok", "assign", ["x", "y"])]
    assert skips(check_kafka(poll_skip_history(sub_xy, assign_xy))) == [([1, 7], 2, ["c"]), ([7, 13], 2, ["f"])]


def test_a_failed_assign_changes_nothing():
    assign_y_fail = [(0, "invoke", "assign", ["y"]), (0, "fail", "assign", ["y"])]
    assert skips(check_kafka(poll_skip_history([], assign_y_fail))) == [([1, 5], 2, ["c"]), ([5, 11], 2, ["f"])]


SEND_0_5 = [(0, "invoke", "send", [["send", "x", i] for i in range(6)]),
            (0, "ok", "send", [["send", "x", [i, i]] for i in range(6)])]


def txn_poll(type_, pairs):
    return [(1, "invoke", "txn", [["poll"]]), (1, type_, "txn", [["poll", {"x": pairs}]])]


def test_aborted_and_crashed_transactions_rewind_the_consumer():
    r = check_kafka(h(*SEND_0_5[:1], (0, "ok", "send", [["send", "x", [i, i]] for i in range(3)]),
                      *txn_poll("ok", [[0, 0]]), *txn_poll("fail", [[1, 1], [2, 2]]),
                      *txn_poll("info", [[1, 1], [2, 2]]), *txn_poll("ok", [[1, 1], [2, 2]])))
    assert r["valid"] is True and r["anomalies"] == {} and r["allowed"] == {}


def test_an_abort_does_not_move_the_consumer_forward():
    r = check_kafka(h(*SEND_0_5, *txn_poll("ok", [[0, 0]]), *txn_poll("fail", [[1, 1], [2, 2]]),
                      *txn_poll("fail", [[3, 3], [4, 4]]), *txn_poll("ok", [[5, 5]])))
    assert [(op_indices(w), w["delta"], w["skipped"]) for w in r["anomalies"]["poll-skip"]] == \
        [([3, 7], 3, [1, 2]), ([3, 9], 5, [1, 2, 3, 4])]


def test_a_crashed_poll_can_be_a_poll_skip():
    r = check_kafka(h(*SEND_0_5, *txn_poll("ok", [[0, 0]]), *txn_poll("fail", [[1, 1], [2, 2]]),
                      *txn_poll("info", [[3, 3], [4, 4]])))
    assert [(op_indices(w), w["delta"], w["skipped"]) for w in r["anomalies"]["poll-skip"]] == \
        [([3, 7], 3, [1, 2])]


# ------------------------------------------------------------------ nonmonotonic-poll / -send

NM_POLL = [(0, "invoke", "send", [["send", "x", v] for v in "abcd"]),
           (0, "ok", "send", [["send", "x", v] for v in "abcd"]),
           (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[1, "a"], [2, "b"], [3, "c"]]}]])]
NM_POLL_2 = [(0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"], [4, "d"]]}]])]


def reassign(f, keys, type_="ok"):
    """Process 0 assigns or subscribes to `keys` (an invoke and its completion)."""
    return [(0, "invoke", f, keys), (0, type_, f, keys)]


@pytest.mark.parametrize("between,expected", [
    ([], True), (reassign("subscribe", ["y"]), False), (reassign("assign", ["y"]), False),
    (reassign("subscribe", ["x", "y"]), True), (reassign("assign", ["x", "y"]), True),
])
def test_nonmonotonic_poll(between, expected):
    r = check_kafka(h(*NM_POLL, *between, *NM_POLL_2))
    ws = found(r, "nonmonotonic-poll")
    if not expected:
        assert ws == []
        return
    (w,) = ws
    n = len(between)
    assert (w["key"], w["values"], w["delta"], op_indices(w)) == ("x", ["c", "b"], -1, [3, 5 + n])


SEND_34 = [(0, "invoke", "send", [["send", "x", "c"], ["send", "x", "d"]]),
           (0, "ok", "send", [["send", "x", [3, "c"]], ["send", "x", [4, "d"]]])]
SEND_12 = [(0, "invoke", "send", [["send", "x", 1], ["send", "x", 2]]),
           (0, "ok", "send", [["send", "x", [1, "a"]], ["send", "x", [2, "b"]]])]


@pytest.mark.parametrize("between,expected", [
    ([], True), (reassign("subscribe", ["y"]), False),
    (reassign("assign", ["y"], "info"), False),                 # info: it may have happened
    (reassign("subscribe", ["x", "y"]), True), (reassign("assign", ["x", "y"]), True),
])
def test_nonmonotonic_send(between, expected):
    r = check_kafka(h(*SEND_34, *between, *SEND_12))
    ws = found(r, "nonmonotonic-send")
    if not expected:
        assert ws == [] and r["valid"] is True
        return
    (w,) = ws
    n = len(between)
    assert (w["key"], w["values"], w["delta"], op_indices(w)) == ("x", ["d", "a"], -3, [1, 3 + n])


def test_nonmonotonic_send_of_an_info_send_placed_by_a_poll():
    # process 0's info send of b lands (a poll shows) before its earlier ok send of c
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "c"]]), (0, "ok", "send", [["send", "x", [3, "c"]]]),
                      (0, "invoke", "send", [["send", "x", "b"]]), (0, "info", "send", [["send", "x", "b"]]),
                      (1, "invoke", "poll", [["poll"]]), (1, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"]]}]])))
    (w,) = r["anomalies"]["nonmonotonic-send"]
    assert (w["values"], w["offsets"], w["delta"], op_indices(w)) == (["c", "b"], [3, 2], -1, [1, 3])


# ------------------------------------------------------------------ internal (one op) anomalies

def test_int_poll_skip_within_a_poll_and_across_polls_of_one_op():
    r = check_kafka(h((1, "invoke", "send", [["send", "x", v] for v in "abd"]),
                      (1, "info", "send", [["send", "x", v] for v in "abd"]),
                      (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[1, "a"], [4, "d"]]}]]),
                      (0, "invoke", "poll", [["poll"], ["poll"]]),
                      (0, "ok", "poll", [["poll", {"x": [[1, "a"]]}], ["poll", {"x": [[4, "d"]]}]]),
                      (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[2, "b"]]}]])))
    assert [(w["values"], w["skipped"], w["delta"], w["op"]) for w in r["anomalies"]["int-poll-skip"]] == \
        [(["a", "d"], ["b"], 2, 3), (["a", "d"], ["b"], 2, 5)]


def test_int_send_skip_found_through_offsets_only_a_poll_reveals():
    # a's offset is acknowledged, c's is not; a poll shows b between them and c at 3
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "a"], ["send", "x", "c"]]),
                      (0, "ok", "send", [["send", "x", [1, "a"]], ["send", "x", "c"]]),
                      (1, "invoke", "send", [["send", "x", "b"]]), (1, "info", "send", [["send", "x", "b"]]),
                      (2, "invoke", "poll", [["poll"]]), (2, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"]]}]])))
    (w,) = found(r, "int-send-skip")
    assert (w["key"], w["values"], w["skipped"], w["delta"], w["op"]) == ("x", ["a", "c"], ["b"], 2, 1)
    assert "int-send-skip" in r["allowed"]          # Kafka does not isolate writes


def test_int_nonmonotonic_poll():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", v] for v in "abc"]),
                      (0, "info", "send", [["send", "x", v] for v in "abc"]),
                      (0, "invoke", "poll", [["poll"]]), (0, "ok", "poll", [["poll", {"x": [[3, "c"], [1, "a"]]}]]),
                      (0, "invoke", "poll", [["poll"]]),
                      (0, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"]]}], ["poll", {"x": [[3, "c"]]}]])))
    assert [(w["values"], w["delta"], w["op"]) for w in r["anomalies"]["int-nonmonotonic-poll"]] == \
        [(["c", "a"], -2, 3), (["c", "c"], 0, 5)]


def test_int_nonmonotonic_send_from_acks_and_from_an_info_send_placed_by_a_poll():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", 3], ["send", "x", 1]]),
                      (0, "ok", "send", [["send", "x", [3, "c"]], ["send", "x", [1, "a"]]]),
                      (0, "invoke", "send", [["send", "y", "d"], ["send", "y", "b"]]),
                      (0, "info", "send", [["send", "y", "d"], ["send", "y", "b"]]),
                      (1, "invoke", "send", [["send", "y", "c"]]), (1, "info", "send", [["send", "y", "c"]]),
                      (0, "invoke", "poll", [["poll"]]),
                      (0, "ok", "poll", [["poll", {"y": [[2, "b"], [3, "c"], [4, "d"]]}]])))
    assert [(w["key"], w["values"], w["delta"], w["op"]) for w in r["anomalies"]["int-nonmonotonic-send"]] == \
        [("x", ["c", "a"], -1, 1), ("y", ["d", "b"], -2, 3)]


# ------------------------------------------------------------------ duplicates

def test_duplicate_a_value_acknowledged_at_one_offset_and_polled_at_another():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "a"]]), (0, "ok", "send", [["send", "x", [1, "a"]]]),
                      (1, "invoke", "send", [["send", "x", "b"]]), (1, "info", "send", [["send", "x", "b"]]),
                      (2, "invoke", "poll", [["poll"]]), (2, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "a"]]}]])))
    (w,) = r["anomalies"]["duplicate"]
    assert (w["key"], w["value"], w["count"], w["offsets"]) == ("x", "a", 2, [1, 3])


def test_duplicates_and_inconsistent_offsets_are_found_whatever_the_order_of_values():
    ops = []
    for v in range(10):
        ops += [(0, "invoke", "send", [["send", "x", v]]), (0, "ok", "send", [["send", "x", [0, v]]]),
                (1, "invoke", "poll", [["poll"]]), (1, "ok", "poll", [["poll", {"x": [[1, v]]}]])]
    r = check_kafka(h(*ops))
    assert sorted(w["value"] for w in r["anomalies"]["duplicate"]) == list(range(10))
    assert [(w["offset"], w["values"]) for w in r["anomalies"]["inconsistent-offsets"]] == \
        [(0, list(range(10))), (1, list(range(10)))]


def test_an_aborted_poll_still_shows_duplicates_but_not_of_the_aborted_send():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", 0]]), (0, "ok", "send", [["send", "x", [1, 0]]]),
                      (0, "invoke", "send", [["send", "x", 1]]), (0, "fail", "send", [["send", "x", [2, 1]]]),
                      (1, "invoke", "poll", [["poll"]]), (1, "fail", "poll", [["poll", {"x": [[11, 0], [12, 1]]}]])))
    assert [(w["value"], w["count"], w["offsets"]) for w in r["anomalies"]["duplicate"]] == [(0, 2, [1, 11])]


# ------------------------------------------------------------------ cycles, precommitted reads

def test_g0_write_cycle_is_found_and_allowed():
    r = check_kafka(h((0, "invoke", "send", [["send", "x", "a"], ["send", "y", "a"]]),
                      (1, "invoke", "send", [["send", "x", "b"], ["send", "y", "b"]]),
                      (0, "ok", "send", [["send", "x", [0, "a"]], ["send", "y", [1, "a"]]]),
                      (1, "ok", "send", [["send", "x", [1, "b"]], ["send", "y", [0, "b"]]])))
    assert len(r["allowed"]["G0"]) == 1 and r["valid"] is True


def test_g1c_pure_wr_cycle():
    r = check_kafka(h((0, "invoke", "txn", [["send", "x", "a"], ["poll"]]),
                      (1, "invoke", "txn", [["send", "y", "b"], ["poll"]]),
                      (0, "ok", "txn", [["send", "x", [0, "a"]], ["poll", {"y": [[0, "b"]]}]]),
                      (1, "ok", "txn", [["send", "y", [0, "b"]], ["poll", {"x": [[0, "a"]]}]])))
    assert len(r["anomalies"]["G1c"]) == 1


def test_g1c_with_a_ww_step_is_allowed():
    r = check_kafka(h((0, "invoke", "txn", [["send", "x", "a"], ["send", "y", "c"]]),
                      (1, "invoke", "txn", [["poll"], ["send", "y", "b"]]),
                      (0, "ok", "txn", [["send", "x", [0, "a"]], ["send", "y", [2, "c"]]]),
                      (1, "ok", "txn", [["poll", {"x": [[0, "a"]]}], ["send", "y", [1, "b"]]])))
    assert "G1c" not in r["anomalies"] and len(r["allowed"]["G1c"]) == 1


def test_precommitted_read():
    r = check_kafka(h((0, "invoke", "txn", [["send", "x", "a"], ["poll"]]),
                      (0, "ok", "txn", [["send", "x", [0, "a"]], ["poll", {"x": [[0, "a"]]}]])))
    (w,) = r["anomalies"]["precommitted-read"]
    assert (w["key"], w["value"], w["op"]) == ("x", "a", 1)
