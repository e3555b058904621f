"""The coordinator-crash scenarios (cluster/scenarios/coordinator_crash.py) run for real, and their facts.

Real runs: a cluster with two transaction coordinators; the owner of the transactional.id crashes
(crash_after_prepare, os._exit) once Prepare* is durable; the run must match on the oldest and the
newest release (0.11: no KIP-360/890; 4.0: epoch bump per transaction), with the crash and the
takeover read back from the recorded history. Without the fault hook no coordinator crashes and the
scenario errors (it waits for the crash); without the takeover the LSO stands and the facts fail.
The fact tests feed hand-made ops to the facts: each must fail on the history a broken run leaves.
"""
import json

import pytest

from cluster.scenarios import coordinator_faults as cf
from cluster.scenarios import get
from cluster.scenarios.base import completions, nemesis_ops
from cluster.scenarios.runner import run_scenario

COMMIT, ABORT = "coordinator-lost-after-prepare-commit", "coordinator-lost-after-prepare-abort"


def _ops(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.integration
# on the default release, tests/scenarios/test_scenarios.py plays both with their facts
@pytest.mark.parametrize("name,version", [(COMMIT, "0.11"), (ABORT, "0.11")])
def test_the_next_owner_completes_the_transaction_the_crashed_coordinator_prepared(name, version, tmp_path,
                                                                                    eoslab_home):
    sc = get(name)
    o = run_scenario(sc, str(tmp_path), home=eoslab_home, kafka_version=version)
    assert o.error is None, o.error
    assert o.observed == frozenset() == sc.expected_for(version), o.line()
    assert o.facts and all(v is None for v in o.facts.values()), o.facts
    ops = _ops(tmp_path / name / "history.jsonl")
    [crash] = nemesis_ops(ops, "stop-coordinator-crash")
    [takeover] = nemesis_ops(ops, "coordinator-takeover")
    assert crash["value"]["node"] != takeover["value"]["node"]
    assert crash["index"] < takeover["index"]
    [txn] = completions(ops, "txn")
    assert txn["type"] == ("fail" if name == ABORT else "ok") or txn["type"] == "info"
    r = json.loads((tmp_path / name / "results.json").read_text())
    assert r["anomalies"] == {} and r["scenario"]["match"] is True and r["scenario"]["kafka_version"] == version


# -- the facts, on hand-made histories ------------------------------------------------------------------
def _nem(f, value):
    return [{"process": "nemesis", "type": "info", "f": f, "value": value}] * 2


CRASH = _nem("stop-coordinator-crash", {"node": "txn-coordinator-2", "state": "dead", "after": "PrepareCommit",
                                        "log": "fault crash-after-prepare-1: PrepareCommit of t is written"})
TAKEOVER = _nem("coordinator-takeover", {"node": "txn-coordinator-1", "state": "CompleteCommit",
                                         "log": "t: resuming PrepareCommit after load"})
TXN = [{"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1], ["send", 1, 2]]},
       {"process": 0, "type": "ok", "f": "txn", "value": [["send", 0, [0, 1]], ["send", 1, [0, 2]]]}]


def _poll(by_key):
    return [{"process": 100, "type": "invoke", "f": "poll", "value": [["poll"]], "isolation": "read_committed"},
            {"process": 100, "type": "ok", "f": "poll", "value": [["poll", by_key]], "isolation": "read_committed"}]


def _offsets(*rows):
    return [{"process": "monitor", "type": "info", "f": "offsets", "value": list(rows)}]


@pytest.mark.fast
def test_the_crash_fact_needs_the_crash_and_its_log_line():
    check = cf.crashed_after("PrepareCommit")
    assert check(CRASH) is None
    assert "did not crash" in check([])
    assert check(_nem("stop-coordinator-crash", dict(CRASH[0]["value"], log=None))) is not None
    assert cf.crashed_after("PrepareAbort")(CRASH) is not None


@pytest.mark.fast
def test_the_takeover_fact_needs_another_node_in_the_complete_state():
    check = cf.completed_elsewhere("CompleteCommit")
    assert check(CRASH + TAKEOVER) is None
    assert check(CRASH) is not None
    same = _nem("coordinator-takeover", dict(TAKEOVER[0]["value"], node="txn-coordinator-2"))
    assert check(CRASH + same) is not None
    assert cf.completed_elsewhere("CompleteAbort")(CRASH + TAKEOVER) is not None


@pytest.mark.fast
def test_the_lso_fact_fails_while_a_partition_hangs():
    check = cf.lso_passed(2)
    assert check(_offsets([0, 0, 1], [1, 0, 1]) + _offsets([0, 2, 2], [1, 2, 2])) is None
    assert check(_offsets([0, 2, 2], [1, 0, 1])) is not None        # partition 1 still hangs
    assert check(_offsets([0, 2, 2])) is not None                   # partition 1 never sampled
    assert check([]) is not None


@pytest.mark.fast
def test_the_read_facts_count_each_record():
    assert cf.read_exactly_once(TXN + _poll({"0": [[0, 1]], "1": [[0, 2]]})) is None
    assert cf.read_exactly_once(TXN + _poll({"0": [[0, 1]]})) is not None                       # lost
    assert cf.read_exactly_once(TXN + _poll({"0": [[0, 1], [2, 1]], "1": [[0, 2]]})) is not None   # twice
    assert cf.read_none(TXN + _poll({})) is None
    assert cf.read_none(TXN + _poll({"1": [[0, 2]]})) is not None
    assert cf.commit_not_refused(TXN) is None
    assert cf.commit_not_refused(TXN[:1] + [dict(TXN[1], type="fail", error="INVALID_TXN_STATE")]) is not None
