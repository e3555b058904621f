"""The lab's producer anomalies: producer-order, pid-reuse, zombie-write."""
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


def test_producer_order_names_the_two_records_out_of_sequence():
    # one session (pid 7, epoch 0): seq 0 landed at offset 1, seq 1 at offset 0
    w = only(check_kafka(DATA / "producer-order.jsonl"), "producer-order")
    assert w["key"] == 0 and w["kind"] == "reordered" and w["order"] == "seq"
    assert w["producer"] == {"pid": 7, "epoch": 0}
    assert [(r["seq"], r["offset"], r["value"], r["op"]) for r in w["records"]] == [(0, 1, 1, 3), (1, 0, 2, 2)]
    assert [o["index"] for o in w["ops"]] == [3, 2]


def test_producer_order_without_seq_uses_invocation_order():
    ops = load("producer-order.jsonl")
    for op in ops:
        op.pop("seq", None)
    w = only(check_kafka(ops), "producer-order")
    assert w["order"] == "invocation"
    # op 3 was invoked first (index 0) yet its record sits after op 2's
    assert [(r["offset"], r["op"]) for r in w["records"]] == [(1, 3), (0, 2)]


def test_records_in_sequence_order_are_fine():
    ops = load("producer-order.jsonl")
    ops[2]["seq"], ops[3]["seq"] = [0], [1]
    assert check_kafka(ops)["valid"] is True


def test_pid_reuse_names_the_pid_and_both_sessions():
    w = only(check_kafka(DATA / "pid-reuse.jsonl"), "pid-reuse")
    assert w["pid"] == 7
    assert [s["session"] for s in w["sessions"]] == ["a", "b"]
    assert [s["first_op"] for s in w["sessions"]] == [1, 3]
    assert [o["index"] for o in w["ops"]] == [1, 3]


def test_same_transactional_id_with_a_higher_epoch_is_not_reuse():
    ops = load("pid-reuse.jsonl")
    ops[1]["producer"]["transactional_id"] = ops[3]["producer"]["transactional_id"] = "t1"
    ops[3]["producer"]["epoch"] = 1
    assert check_kafka(ops)["valid"] is True


def test_zombie_write_names_fence_writer_and_reader():
    # epoch 1 of pid 7 was live at op 3; epoch 0 sent afterwards and a read_committed poll saw it
    w = only(check_kafka(DATA / "zombie-write.jsonl"), "zombie-write")
    assert (w["pid"], w["epoch"], w["fenced_by_epoch"]) == (7, 0, 1)
    assert (w["fence_op"], w["writer"], w["reader"]) == (3, 5, 7)
    assert (w["key"], w["value"], w["offset"]) == (0, 1, 0)
    assert [o["index"] for o in w["ops"]] == [3, 5, 7]


def test_zombie_write_needs_a_read_committed_reader():
    ops = load("zombie-write.jsonl")
    ops[7]["isolation"] = "read_uncommitted"
    assert check_kafka(ops)["valid"] is True


def test_a_write_invoked_before_the_fence_is_not_a_zombie():
    ops = load("zombie-write.jsonl")
    # move the old producer's invoke before the new epoch's init completes
    inv = ops.pop(4)
    ops.insert(2, inv)
    for i, op in enumerate(ops):
        op["index"] = i
    assert check_kafka(ops)["valid"] is True


def test_producers_without_an_id_are_not_one_producer():
    """A producer without idempotence records pid -1: two of them are two sessions, not a reused pid."""
    ops = load("pid-reuse.jsonl")
    for op in ops:
        if "producer" in op:
            op["producer"]["pid"] = -1
            op["producer"]["epoch"] = -1
    r = check_kafka(ops)
    assert "pid-reuse" not in r["anomalies"], r["anomalies"]


def test_a_history_of_producer_id_allocations_is_something_to_check():
    """The pid workload records only init-producer ops: the pid-reuse analysis judges them."""
    ops = []
    for i, (pid, epoch) in enumerate([(1000, 0), (1000, 1), (1001, 0)]):
        ops.append({"index": 2 * i, "time": 2 * i, "process": i, "type": "invoke", "f": "init-producer",
                    "value": None})
        ops.append({"index": 2 * i + 1, "time": 2 * i + 1, "process": i, "type": "ok", "f": "init-producer",
                    "value": {"pid": pid, "epoch": epoch},
                    "producer": {"pid": pid, "epoch": epoch, "session": f"s{i}", "transactional_id": f"t{pid}"}})
    r = check_kafka(ops)
    assert r["valid"] is True, r["anomalies"]
