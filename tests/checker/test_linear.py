"""The linearizability checker on small hand-made histories (checker.linear)."""
from __future__ import annotations

import json
import random
import time

import pytest

from checker.history import NIL_READS_UNKNOWN, HistoryError, Op
from checker.linear import LinearizabilityChecker, check_linearizable, search
from checker.models import get_model

pytestmark = pytest.mark.fast


def h(*events) -> list[Op]:
    """events: (process, type, f, value[, key])."""
    ops = []
    for i, e in enumerate(events):
        p, t, f, v = e[:4]
        ops.append(Op(index=i, process=p, type=t, f=f, value=v, key=e[4] if len(e) > 4 else None,
                      line=i + 1))
    return ops


def check(ops, model="register", initial=None, **kw):
    return check_linearizable(ops, model, initial, **kw)


def test_sequential_history_is_valid():
    r = check(h((0, "invoke", "write", 1), (0, "ok", "write", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 1)))
    assert r["valid"] is True and r["anomalies"] == {}


def test_empty_history_is_unknown_not_valid():
    r = check([])
    assert r["valid"] == "unknown" and r["stats"]["reason"].startswith("nothing to check")


@pytest.mark.parametrize("seen", [0, 1])
def test_concurrent_read_may_see_old_or_new_value(seen):
    r = check(h((0, "invoke", "write", 1), (1, "invoke", "read", None),
                (1, "ok", "read", seen), (0, "ok", "write", 1)), initial=0)
    assert r["valid"] is True


def test_stale_read_after_a_completed_write_is_invalid_and_named():
    r = check(h((0, "invoke", "write", 1), (0, "ok", "write", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 0)), initial=0)
    assert r["valid"] is False
    w = r["anomalies"]["nonlinearizable"]
    assert w["op"] == {"index": 3, "invoke_index": 2, "process": 1, "type": "ok", "f": "read",
                       "value": 0, "line": 4}
    assert w["prefix"] == [0] and w["states"] == [1] and w["model"] == "register"


def test_real_time_order_is_respected_between_writes():
    r = check(h((0, "invoke", "write", 1), (0, "ok", "write", 1),
                (0, "invoke", "write", 2), (0, "ok", "write", 2),
                (1, "invoke", "read", None), (1, "ok", "read", 1)))
    assert r["valid"] is False


def test_info_write_may_take_effect_later():
    r = check(h((0, "invoke", "write", 1), (0, "info", "write", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 0),
                (1, "invoke", "read", None), (1, "ok", "read", 1)), initial=0)
    assert r["valid"] is True


def test_info_write_may_never_take_effect():
    r = check(h((0, "invoke", "write", 1), (0, "info", "write", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 0)), initial=0)
    assert r["valid"] is True


def test_info_write_cannot_take_effect_before_its_invoke():
    r = check(h((1, "invoke", "read", None), (1, "ok", "read", 1),
                (0, "invoke", "write", 1), (0, "info", "write", 1)), initial=0)
    assert r["valid"] is False


def test_info_write_takes_effect_at_most_once():
    r = check(h((0, "invoke", "write", 1), (0, "info", "write", 1),
                (2, "invoke", "write", 2), (2, "ok", "write", 2),
                (1, "invoke", "read", None), (1, "ok", "read", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 2),
                (1, "invoke", "read", None), (1, "ok", "read", 1)), initial=0)
    assert r["valid"] is False


def test_invoke_without_completion_behaves_like_info():
    ops = h((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert check(ops, initial=0)["valid"] is True


def test_failed_write_never_happened():
    r = check(h((0, "invoke", "write", 1), (0, "fail", "write", 1),
                (1, "invoke", "read", None), (1, "ok", "read", 1)), initial=0)
    assert r["valid"] is False


def test_failed_cas_is_ignored_but_ok_cas_must_match():
    ok = h((0, "invoke", "cas", [5, 6]), (0, "fail", "cas", [5, 6]),
           (0, "invoke", "cas", [0, 2]), (0, "ok", "cas", [0, 2]),
           (1, "invoke", "read", None), (1, "ok", "read", 2))
    assert check(ok, "cas-register", 0)["valid"] is True
    bad = h((0, "invoke", "cas", [5, 6]), (0, "ok", "cas", [5, 6]))
    assert check(bad, "cas-register", 0)["valid"] is False


def test_info_read_constrains_nothing():
    r = check(h((1, "invoke", "read", None), (1, "info", "read", None)), initial=0)
    assert r["valid"] is True and r["stats"]["constraining"] == 0


def test_jepsen_nil_read_is_unconstrained_but_plain_null_read_is_strict():
    ops = h((1, "invoke", "read", None), (1, "ok", "read", None))
    assert check(ops, initial=0)["valid"] is False
    ops[1].extra[NIL_READS_UNKNOWN] = True
    assert check(ops, initial=0)["valid"] is True


def test_witness_lists_distinct_states_before_the_failing_op():
    # w0; then concurrent w4 and a read of 3, then a read of 4 (knossos' rethink-fail-minimal)
    r = check(h((0, "invoke", "write", 0), (0, "ok", "write", 0),
                (1, "invoke", "read", None), (2, "invoke", "write", 4),
                (1, "ok", "read", 3), (2, "ok", "write", 4),
                (3, "invoke", "read", None), (3, "ok", "read", 4)))
    w = r["anomalies"]["nonlinearizable"]
    assert (w["op"]["index"], w["op"]["process"], w["op"]["value"]) == (4, 1, 3)
    assert sorted(w["states"]) == [0, 4]
    assert w["prefix"][0] == 0


def test_partitions_are_checked_independently_and_the_bad_key_is_named():
    ops = h((0, "invoke", "put", "a", "k1"), (0, "ok", "put", "a", "k1"),
            (1, "invoke", "put", "b", "k2"), (1, "ok", "put", "b", "k2"),
            (2, "invoke", "get", None, "k1"), (2, "ok", "get", "a", "k1"),
            (3, "invoke", "get", None, "k2"), (3, "ok", "get", "a", "k2"))
    r = check(ops, "kv")
    assert r["valid"] is False and r["stats"]["partitions"] == 2
    assert r["anomalies"]["nonlinearizable"]["key"] == "k2"
    assert check(ops[:6], "kv")["valid"] is True


def test_independent_tuples_make_one_register_per_key():
    ops = h((0, "invoke", "write", ["a", 1]), (0, "ok", "write", ["a", 1]),
            (1, "invoke", "write", ["b", 2]), (1, "ok", "write", ["b", 2]),
            (2, "invoke", "read", ["a", None]), (2, "ok", "read", ["a", 1]))
    r = check(ops, "register")
    assert r["valid"] is True and r["stats"]["partitions"] == 2
    ops[5].value = ["a", 2]
    assert check(ops, "register")["valid"] is False


@pytest.mark.parametrize("model, good, bad", [
    ("set", [("add", 1, 1), ("add", 2, 2), ("read", None, [1, 2])], [("add", 1, 1), ("read", None, [])]),
    ("queue", [("enqueue", 1, 1), ("enqueue", 2, 2), ("dequeue", None, 1)],
     [("enqueue", 1, 1), ("enqueue", 2, 2), ("dequeue", None, 2)]),
    ("log", [("append", "x", 0), ("append", "y", 1), ("read", None, ["x", "y"])],
     [("append", "x", 0), ("append", "y", 0)]),
    ("multi-register", [("txn", [["w", "x", 1]], [["w", "x", 1]]), ("txn", [["r", "x", None]], [["r", "x", 1]])],
     [("txn", [["w", "x", 1]], [["w", "x", 1]]), ("txn", [["r", "x", None]], [["r", "x", 0]])]),
])
def test_every_model_end_to_end(model, good, bad):
    def seq(steps):
        ops = []
        for f, v, res in steps:
            ops += [Op(len(ops), 0, "invoke", f, v), Op(len(ops) + 1, 0, "ok", f, res)]
        return ops
    assert check(seq(good), model)["valid"] is True
    r = check(seq(bad), model)
    assert r["valid"] is False
    json.dumps(r)                  # results are plain JSON data, witness states included


def test_tiny_time_limit_gives_unknown():
    rng = random.Random(7)
    events = []
    for p in range(6):
        events.append((p, "invoke", "write", rng.randrange(3)))
    for p in range(6):
        events.append((p, "info", "write", events[p][3]))
    for i in range(200):
        events += [(10, "invoke", "read", None), (10, "ok", "read", rng.randrange(3))]
    r = check(h(*events), initial=0, time_limit=1e-9)
    assert r["valid"] == "unknown" and "time limit" in r["stats"]["reason"]
    assert r["anomalies"] == {}


def test_search_returns_none_when_the_deadline_has_passed():
    m = get_model("register")
    res = search(m, None, [("w", 1)], [0], [1], deadline=time.monotonic() - 1)
    assert res.valid is None


def test_search_returns_a_linearization_when_valid():
    m = get_model("register")
    ops = [("w", 1), ("r", 1), ("w", 2)]
    res = search(m, None, ops, [0, 1, 2], [5, 4, 3])
    assert res.valid is True
    assert res.order.index(0) < res.order.index(1)
    assert res.order.index(2) > res.order.index(1) or res.order.index(2) < res.order.index(0)


def test_checker_class_interface():
    c = LinearizabilityChecker("cas-register", 0, time_limit=10)
    r = c.check(h((0, "invoke", "read", None), (0, "ok", "read", 0)))
    assert c.name == "linearizable" and r["valid"] is True
    assert r["stats"]["model"] == "cas-register" and r["stats"]["ops"] == 2


def test_history_errors_propagate():
    with pytest.raises(HistoryError, match="double invoke"):
        check(h((0, "invoke", "read", None), (0, "invoke", "read", None)))


def test_op_the_model_does_not_know_is_a_history_error_naming_the_line():
    with pytest.raises(HistoryError, match="line 1: the register model has no op 'enqueue'"):
        check(h((0, "invoke", "enqueue", 1), (0, "ok", "enqueue", 1)))


def test_unknown_model_is_a_value_error():
    with pytest.raises(ValueError, match="unknown model"):
        check([], "btree")


def test_large_concurrent_history_finishes_quickly():
    rng = random.Random(1)
    state, events = 0, []
    for i in range(3000):
        p = i % 5
        if rng.random() < 0.5:
            v = rng.randrange(5)
            events += [(p, "invoke", "write", v)]
            state = v
            events += [(p, "ok", "write", v)]
        else:
            events += [(p, "invoke", "read", None), (p, "ok", "read", state)]
    t = time.monotonic()
    assert check(h(*events), initial=0)["valid"] is True
    assert time.monotonic() - t < 10
