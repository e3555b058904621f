"""Say why a producer was fenced (checker.explain.explain_fencings): by its transaction's timeout when
the history records a clock jump on a coordinator or the coordinator's abort on timeout, a zombie
only when a newer instance of its transactional.id preceded it, nothing when the history says neither."""
import pytest

from checker.explain import explain, explain_fencings
from checker.report import why_section

pytestmark = pytest.mark.fast

TID = "clock-batch"


def producer(session="app", epoch=0):
    return {"pid": 1000, "epoch": epoch, "session": session, "transactional_id": TID}


def history(*middle, error="PRODUCER_FENCED"):
    """init, a txn invoked, the middle ops, then the txn refused with `error`."""
    ops = [{"process": 0, "type": "invoke", "f": "init-producer", "value": None},
           {"process": 0, "type": "ok", "f": "init-producer", "value": None, "producer": producer()},
           {"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]}]
    ops += list(middle)
    ops.append({"process": 0, "type": "fail", "f": "txn", "value": [["send", 0, 1]], "producer": producer(),
                "error": error})
    return [dict(o, index=i) for i, o in enumerate(ops)]


def nemesis(f, value):
    return [{"process": "nemesis", "type": "info", "f": f, "value": None},
            {"process": "nemesis", "type": "info", "f": f, "value": value}]


JUMP = nemesis("start-clock-jump", {"node": "txn-coordinator-1", "offset_s": 120})


def test_a_clock_jump_on_the_coordinator_is_named_as_the_transaction_timeout():
    [r] = explain_fencings(history(*JUMP))
    assert r["why"].startswith("fenced by transaction timeout (clock jump on txn-coordinator-1)")
    assert "zombie" not in r["why"] and r["cause"] == "transaction-timeout"
    assert (r["op"], r["transactional_id"], r["error"]) == (5, TID, "PRODUCER_FENCED")
    assert r["scenario"] == "clock-jump-fences-live-producer"


def test_the_coordinators_abort_on_timeout_alone_also_says_transaction_timeout():
    abort = nemesis("coordinator-abort", {"transactional_id": TID, "reason": "timeout", "state": "CompleteAbort"})
    [r] = explain_fencings(history(*abort, error="INVALID_PRODUCER_EPOCH"))
    assert r["why"].startswith("fenced by transaction timeout") and "zombie" not in r["why"]
    other = nemesis("coordinator-abort", {"transactional_id": "someone-else", "reason": "timeout"})
    assert explain_fencings(history(*other)) == []          # another id's timeout explains nothing here


def test_a_newer_instance_of_the_id_is_a_zombie_and_a_clock_jump_outranks_it():
    newer = [{"process": 1, "type": "invoke", "f": "init-producer", "value": None},
             {"process": 1, "type": "ok", "f": "init-producer", "value": None, "producer": producer("new", 1)}]
    [r] = explain_fencings(history(*newer))
    assert r["cause"] == "zombie" and "zombie" in r["why"]
    [r] = explain_fencings(history(*newer, *JUMP))
    assert r["cause"] == "transaction-timeout"


def test_nothing_is_guessed_for_a_fencing_the_history_does_not_explain():
    assert explain_fencings(history()) == []
    back = nemesis("start-clock-jump", {"node": "txn-coordinator-1", "offset_s": -60})
    assert explain_fencings(history(*back)) == []            # a backward jump makes transactions younger
    broker = nemesis("start-clock-jump", {"node": "broker-1", "offset_s": 120})
    assert explain_fencings(history(*broker)) == []          # the timeout is the coordinator's rule
    ended = nemesis("start-clock-jump", {"node": "txn-coordinator-1", "offset_s": 120}) + \
        nemesis("stop-clock-jump", {"node": "txn-coordinator-1", "offset_s": 120, "restored_s": 0})
    ops = history()
    early = [dict(o, index=i) for i, o in enumerate(ended + [{k: v for k, v in o.items() if k != "index"}
                                                             for o in ops])]
    assert explain_fencings(early) == []                     # the jump was over before the transaction began


def test_explain_puts_it_under_fenced_and_the_report_shows_it():
    why = explain([], None, ops=history(*JUMP))
    assert list(why) == ["fenced"]
    html = why_section(why)
    assert "fenced by transaction timeout (clock jump on txn-coordinator-1)" in html and "zombie" not in html
    assert explain([], None) == {} and explain([], None, ops=history()) == {}
