"""One test per model rule (checker.models)."""
from __future__ import annotations

import pytest

from checker.formats.pairs import Call
from checker.history import UNKNOWN, Op
from checker.models import MODELS, FrozenMap, freeze, get_model, thaw

pytestmark = pytest.mark.fast


def step(model, state, f, value, result=UNKNOWN, **kw):
    op = model.prepare(f, value, result, **kw)
    assert op is not None
    return model.step(state, op)


def call(f, value, result=UNKNOWN, key=None, process=0, start=0, end=1):
    inv = Op(index=start, process=process, type="invoke", f=f, value=value, key=key)
    return Call(inv, None, start, end, key, value, result, False)


# ------------------------------------------------------------------ registry

def test_registry_names_every_model():
    assert set(MODELS) == {"register", "cas-register", "multi-register", "kv", "set", "queue", "log"}
    for name, factory in MODELS.items():
        assert factory().name == name


def test_unknown_model_name_is_an_error():
    with pytest.raises(ValueError, match="unknown model 'nope'; known models: register"):
        get_model("nope")


def test_freeze_makes_hashable_values_and_thaw_inverts_it():
    v = {"a": [1, {"b": None}], "c": "x"}
    f = freeze(v)
    hash(f)
    assert thaw(f) == v


def test_frozen_map_is_not_equal_to_a_list_of_pairs():
    assert freeze({"a": 1}) != freeze([["a", 1]])
    assert freeze({"a": 1, "b": 2}) == freeze({"b": 2, "a": 1})
    assert isinstance(freeze({}), FrozenMap)


# ------------------------------------------------------------------ register

def test_register_starts_null_unless_told():
    m = get_model("register")
    assert m.init() is None and m.init(None) is None
    assert m.init(0) == 0 and m.init({"x": 0}) == freeze({"x": 0})


def test_register_write_sets_the_value():
    m = get_model("register")
    assert step(m, None, "write", 3, 3) == (True, 3)


def test_register_read_must_equal_the_state():
    m = get_model("register")
    assert step(m, 3, "read", None, 3) == (True, 3)
    assert step(m, 3, "read", None, 4)[0] is False


def test_register_read_of_null_matches_only_a_null_state():
    m = get_model("register")
    assert step(m, None, "read", None, None) == (True, None)
    assert step(m, 0, "read", None, None)[0] is False


def test_register_read_with_unknown_result_constrains_nothing():
    m = get_model("register")
    assert m.prepare("read", None, UNKNOWN) is None


def test_register_jepsen_nil_read_constrains_nothing_but_other_reads_do():
    m = get_model("register")
    assert m.prepare("read", None, None, nil_unknown=True) is None
    assert step(m, 0, "read", None, 5, nil_unknown=True)[0] is False


def test_register_ok_value_supersedes_invoke_value_for_writes():
    m = get_model("register")
    assert step(m, None, "write", 1, 2) == (True, 2)
    assert step(m, None, "write", 1, UNKNOWN) == (True, 1)


def test_register_accepts_short_names_and_rejects_unknown_ops():
    m = get_model("register")
    assert step(m, None, "w", 1, 1) == (True, 1)
    with pytest.raises(ValueError, match="the register model has no op 'cas'"):
        m.prepare("cas", [1, 2], [1, 2])


def test_register_structured_values_compare_by_content():
    m = get_model("register")
    s = m.init({"x": [1, 2]})
    assert step(m, s, "read", None, {"x": [1, 2]})[0] is True
    assert step(m, s, "read", None, {"x": [2, 1]})[0] is False


def test_register_partitions_by_op_key():
    m = get_model("register")
    groups = m.partition([call("write", 1, 1, key="a"), call("write", 2, 2, key="b"),
                          call("read", None, 1, key="a")])
    assert {k: len(v) for k, v in groups.items()} == {"a": 2, "b": 1}


def test_register_partitions_independent_tuples_and_strips_the_key():
    m = get_model("register")
    groups = m.partition([call("write", ["a", 1], ["a", 1]), call("read", ["a", None], ["a", 1]),
                          call("write", ["b", 5], UNKNOWN)])
    assert set(groups) == {"a", "b"}
    assert [(c.value, c.result, c.key) for c in groups["a"]] == [(1, 1, "a"), (None, 1, "a")]
    assert groups["b"][0].value == 5 and groups["b"][0].result is UNKNOWN


def test_register_plain_history_is_not_partitioned():
    m = get_model("register")
    assert m.partition([call("write", 1, 1), call("read", None, 1)]) is None


# --------------------------------------------------------------- cas-register

def test_cas_register_cas_succeeds_when_old_matches():
    m = get_model("cas-register")
    assert step(m, 1, "cas", [1, 4], [1, 4]) == (True, 4)


def test_cas_register_cas_fails_when_old_differs():
    m = get_model("cas-register")
    assert step(m, 2, "cas", [1, 4], [1, 4]) == (False, 2)


def test_cas_register_cas_value_must_be_a_pair():
    with pytest.raises(ValueError, match=r"cas needs a value \[old new\]"):
        get_model("cas-register").prepare("cas", 3, 3)


def test_cas_register_independent_tuples_need_pairs_inside_cas():
    m = get_model("cas-register")
    assert m.partition([call("cas", [1, 4], [1, 4]), call("write", [2, 3], [2, 3])]) is None
    groups = m.partition([call("cas", ["k", [1, 4]], UNKNOWN), call("write", ["k", 1], ["k", 1])])
    assert list(groups) == ["k"]


# ------------------------------------------------------------- multi-register

def test_multi_register_txn_applies_micro_ops_in_order():
    m = get_model("multi-register")
    s = m.init({"x": 0, "y": 0})
    ok, s2 = step(m, s, "txn", None, [["write", "x", 1], ["read", "x", 1], ["read", "y", 0]])
    assert ok and m.describe(s2) == {"x": 1, "y": 0}


def test_multi_register_read_must_match_and_absent_keys_read_null():
    m = get_model("multi-register")
    s = m.init({"x": 0})
    assert step(m, s, "txn", None, [["read", "x", 1]])[0] is False
    assert step(m, s, "txn", None, [["r", "z", None]])[0] is True
    assert step(m, s, "txn", None, [["r", "x", None]])[0] is False


def test_multi_register_failed_read_leaves_no_partial_writes():
    m = get_model("multi-register")
    s = m.init({"x": 0})
    assert step(m, s, "txn", None, [["w", "x", 5], ["r", "x", 6]]) == (False, s)


def test_multi_register_indeterminate_txn_keeps_writes_drops_reads():
    m = get_model("multi-register")
    op = m.prepare("txn", [["read", "x", None], ["write", "y", 2]], UNKNOWN)
    assert op == (("w", "y", 2),)
    assert m.prepare("txn", [["read", "x", None]], UNKNOWN) is None


def test_multi_register_jepsen_nil_read_in_ok_txn_is_unknown():
    m = get_model("multi-register")
    op = m.prepare("txn", None, [["read", "x", None], ["read", "y", 3]], nil_unknown=True)
    assert op == (("r", "y", 3),)


def test_multi_register_needs_a_map_and_txn_ops():
    m = get_model("multi-register")
    with pytest.raises(ValueError, match="starts from a map"):
        m.init(0)
    with pytest.raises(ValueError, match="has no op 'read'"):
        m.prepare("read", None, 1)
    with pytest.raises(ValueError, match=r"micro-op is \[f key value\]"):
        m.prepare("txn", None, [["read", "x"]])


def test_multi_register_partitions_by_connected_keys():
    m = get_model("multi-register")
    calls = [call("txn", [["w", "x", 1], ["w", "y", 1]]), call("txn", [["w", "z", 1]]),
             call("txn", [["r", "y", None]], [["r", "y", 1]])]
    groups = m.partition(calls)
    assert sorted(len(g) for g in groups.values()) == [1, 2]
    assert m.partition(calls[:1]) is None


# ------------------------------------------------------------------------- kv

def test_kv_put_then_get():
    m = get_model("kv")
    ok, s = step(m, m.init(), "put", "v1", key="a")
    assert ok and step(m, s, "get", None, "v1", key="a") == (True, s)
    assert step(m, s, "get", None, "v2", key="a")[0] is False


def test_kv_append_concatenates_and_an_absent_key_counts_as_empty():
    m = get_model("kv")
    ok, s = step(m, m.init(), "append", "ab", key="k")
    ok, s = step(m, s, "append", "c", key="k")
    assert m.describe(s) == {"k": "abc"}


def test_kv_get_of_a_never_written_key_is_the_empty_string_as_in_porcupine():
    m = get_model("kv")
    assert step(m, m.init(), "get", None, "", key="k")[0] is True
    assert step(m, m.init(), "get", None, None, key="k")[0] is True      # null reads as ""
    assert step(m, m.init({"k": "x"}), "get", None, "", key="k")[0] is False
    assert step(m, m.init(), "get", None, "x", key="k")[0] is False


def test_kv_a_key_holding_the_empty_string_is_the_never_written_state():
    m = get_model("kv")
    ok, s = step(m, m.init({"k": "x"}), "put", "", key="k")
    assert ok and s == m.init() and m.describe(s) == {}


def test_kv_get_with_unknown_result_constrains_nothing():
    assert get_model("kv").prepare("get", None, UNKNOWN, key="k") is None


def test_kv_values_must_be_strings():
    with pytest.raises(ValueError, match="needs a string value"):
        get_model("kv").prepare("put", 3, 3, key="k")


def test_kv_independent_tuples_carry_the_key():
    m = get_model("kv")
    ok, s = step(m, m.init(), "put", ["k", "v"], ["k", "v"])
    assert ok and m.describe(s) == {"k": "v"}


def test_kv_partitions_per_key_and_restricts_initial():
    m = get_model("kv")
    groups = m.partition([call("put", "1", key="a"), call("put", "2", key="b")])
    assert set(groups) == {"a", "b"}
    assert m.restrict({"a": "x", "b": "y"}, "a") == {"a": "x"}
    with pytest.raises(ValueError, match="kv ops need a key"):
        m.partition([call("put", "1")])


# ------------------------------------------------------------------------ set

def test_set_add_then_read_compares_as_a_set():
    m = get_model("set")
    ok, s = step(m, m.init(), "add", 1)
    ok, s = step(m, s, "add", 2)
    assert step(m, s, "read", None, [2, 1, 2])[0] is True
    assert step(m, s, "read", None, [1])[0] is False


def test_set_read_with_unknown_result_constrains_nothing():
    assert get_model("set").prepare("read", None, UNKNOWN) is None


# ---------------------------------------------------------------------- queue

def test_queue_is_fifo():
    m = get_model("queue")
    _, s = step(m, m.init(), "enqueue", 1)
    _, s = step(m, s, "enqueue", 2)
    assert step(m, s, "dequeue", None, 2)[0] is False
    ok, s = step(m, s, "dequeue", None, 1)
    assert ok and s == (2,)


def test_queue_dequeue_of_null_only_on_an_empty_queue():
    m = get_model("queue")
    assert step(m, (), "dequeue", None, None) == (True, ())
    assert step(m, (1,), "dequeue", None, None)[0] is False


def test_queue_unknown_dequeue_removes_the_head_if_any():
    m = get_model("queue")
    assert step(m, (1, 2), "dequeue", None, UNKNOWN) == (True, (2,))
    assert step(m, (), "dequeue", None, UNKNOWN) == (True, ())


# ------------------------------------------------------------------------ log

def test_log_append_must_get_the_next_offset():
    m = get_model("log")
    assert step(m, ("a",), "append", "b", 1) == (True, ("a", "b"))
    assert step(m, ("a",), "append", "b", 0)[0] is False
    assert step(m, ("a",), "append", "b", ["b", 1]) == (True, ("a", "b"))


def test_log_append_without_known_offset_goes_to_the_end():
    m = get_model("log")
    assert step(m, ("a",), "append", "b", UNKNOWN) == (True, ("a", "b"))


def test_log_read_returns_the_whole_log_from_its_offset():
    m = get_model("log")
    assert step(m, ("a", "b"), "read", None, ["a", "b"])[0] is True
    assert step(m, ("a", "b"), "read", None, ["a"])[0] is False
    assert step(m, ("a", "b"), "read", 1, ["b"])[0] is True


def test_log_read_with_unknown_result_constrains_nothing_and_bad_offsets_are_errors():
    m = get_model("log")
    assert m.prepare("read", None, UNKNOWN) is None
    with pytest.raises(ValueError, match="completes with its offset"):
        m.prepare("append", "x", "not-an-offset")


def test_log_partitions_by_key():
    m = get_model("log")
    groups = m.partition([call("append", "a", 0, key="p0"), call("append", "b", 0, key="p1")])
    assert set(groups) == {"p0", "p1"}
