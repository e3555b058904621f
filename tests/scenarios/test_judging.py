"""How a scenario's recorded history is judged, without a cluster: the verdict is the checker's,
a mismatch is reported as one, and the extra facts are read from the ops."""
import json

import pytest

from cluster.scenarios import get, restarts, transactions
from cluster.scenarios.base import ClusterSpec, Fact, Scenario
from cluster.scenarios.runner import Outcome, judge

pytestmark = pytest.mark.fast


def write(path, ops):
    with open(path, "w") as f:
        for i, op in enumerate(ops):
            f.write(json.dumps(dict({"index": i, "time": i * 1000}, **op)) + "\n")


def send(p, t, v, off=None, **kw):
    return dict(process=p, type=t, f="send", value=[["send", 0, [off, v] if t == "ok" else v]], **kw)


def poll(pairs):
    return [dict(process=9, type="invoke", f="poll", value=[["poll"]]),
            dict(process=9, type="ok", f="poll", value=[["poll", {"0": pairs}]])]


DUPLICATED = [send(0, "invoke", 1), send(0, "ok", 1, 0), send(1, "invoke", 1), send(1, "ok", 1, 1)] + \
    poll([[0, 1], [1, 1]])


def scenario(expected=(), facts=()):
    return Scenario("t", "-", "-", ClusterSpec(), frozenset(expected), lambda ctx: None, tuple(facts))


@pytest.mark.parametrize("expected, match", [((), False), (("duplicate",), True), (("duplicate", "G1a"), False)])
def test_observed_is_the_checker_s_anomalies_and_must_equal_the_expected_set(tmp_path, expected, match):
    write(tmp_path / "history.jsonl", DUPLICATED)
    sc = scenario(expected)
    result, observed, facts = judge(sc, str(tmp_path))
    assert observed == {"duplicate"} and result["valid"] is False and facts == {}
    o = Outcome("t", sc.expected, observed, facts)
    assert o.match is match
    assert ("MISMATCH" if not match else "MATCH") in o.line().split()
    assert (tmp_path / "report.html").stat().st_size > 0


def test_a_fact_that_fails_or_cannot_be_read_breaks_the_match(tmp_path):
    write(tmp_path / "history.jsonl", DUPLICATED)
    sc = scenario(("duplicate",), [Fact("holds", lambda ops: None), Fact("does not", lambda ops: "because"),
                                   Fact("broken", lambda ops: ops[99])])
    _, observed, facts = judge(sc, str(tmp_path))
    assert facts["holds"] is None and facts["does not"] == "because"
    assert facts["broken"].startswith("could not be checked")
    o = Outcome("t", sc.expected, observed, facts)
    assert not o.match and "does not: NOT (because)" in o.line()
    assert not Outcome("t", frozenset(), error="boom").match


def _init(p, session, pid, epoch):
    pr = {"pid": pid, "epoch": epoch, "session": session, "transactional_id": "t"}
    return [dict(process=p, type="invoke", f="init-producer", value=None),
            dict(process=p, type="ok", f="init-producer", value=None, producer=pr)]


def _ops(ops):
    return [dict({"index": i}, **o) for i, o in enumerate(ops)]


def test_zombie_fenced_needs_every_late_zombie_op_refused_as_fenced():
    zombie = {"pid": 0, "epoch": 0, "session": "app-1", "transactional_id": "t"}
    base = _init(0, "app-1", 0, 0) + _init(1, "app-2", 0, 1)
    fenced = dict(process=0, type="fail", f="txn", value=[["send", 0, 1]], producer=zombie,
                  error="PRODUCER_FENCED")
    assert restarts.zombie_fenced(_ops(base + [fenced])) is None
    assert restarts.zombie_fenced(_ops(base)) is not None                       # the zombie never tried
    leaked = dict(fenced, type="ok", error=None)
    assert "not refused" in restarts.zombie_fenced(_ops(base + [leaked]))
    assert restarts.same_pid_higher_epoch(_ops(base)) is None
    assert restarts.same_pid_higher_epoch(_ops(_init(0, "app-1", 0, 3) + _init(1, "app-2", 0, 1))) is not None


def test_new_pid_at_epoch_0_is_read_from_the_init_ops():
    assert transactions.new_pid_epoch_0(_ops(_init(0, "run-1", 0, 0) + _init(1, "run-2", 1000, 0))) is None
    assert transactions.new_pid_epoch_0(_ops(_init(0, "run-1", 0, 0) + _init(1, "run-2", 0, 1))) is not None
    assert transactions.new_pid_epoch_0(_ops(_init(0, "run-1", 0, 0))) is not None
    assert get("transactional-id-expired").facts[0].check is transactions.new_pid_epoch_0
