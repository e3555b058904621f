"""The unclean-election hanging transaction (cluster/scenarios/hanging_unclean.py) run for real, and its facts.

Real run on 3.0 (the default release is played by tests/scenarios/test_scenarios.py): the verdict is
{hanging-transaction, lost-write}, every fact holds, the follower that was paused is the new leader,
and the abort was written at offset 0 (the committed transaction's record). The pure helpers and the
facts get hand-made ops: each fact must fail on the history a broken run leaves.
"""
import json

import pytest

from cluster.scenarios import get
from cluster.scenarios import hanging_unclean as hu
from cluster.scenarios.base import nemesis_ops
from cluster.scenarios.runner import run_scenario

NAME = "hanging-unclean-election"


def _ops(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.integration
def test_the_uncleanly_elected_follower_hangs_until_the_operator_aborts(tmp_path, eoslab_home):
    sc = get(NAME)
    o = run_scenario(sc, str(tmp_path), home=eoslab_home, kafka_version="3.0")
    assert o.error is None, o.error
    assert o.observed == frozenset({"hanging-transaction", "lost-write"}) == sc.expected_for("3.0"), o.line()
    assert o.facts and all(v is None for v in o.facts.values()), o.facts
    ops = _ops(tmp_path / NAME / "history.jsonl")
    [paused] = nemesis_ops(ops, "start-pause")
    leaders = nemesis_ops(ops, "leader")
    assert leaders[-1]["value"]["node"] == paused["value"] and leaders[-1]["value"]["isr"] == [
        int(paused["value"].split("-")[1])]
    r = json.loads((tmp_path / NAME / "results.json").read_text())
    [hang] = r["anomalies"]["hanging-transaction"]
    assert hang["offset"] == 0 and hang["standing_at_end"] is False
    assert r["scenario"]["match"] is True and r["scenario"]["kafka_version"] == "3.0"


# -- the pure helpers and the facts, on hand-made ops -------------------------------------------------------
TABLE = [("Topic       \tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\t"
          "Duration(min)\t"),
         "hang-unclean\t0        \t1000      \t0            \t-1              \t0          \t1764125000000\t0\t"]


def test_parse_table_reads_find_hangings_columns():
    assert hu.parse_table(TABLE) == [{"Topic": "hang-unclean", "Partition": "0", "ProducerId": "1000",
                                      "ProducerEpoch": "0", "CoordinatorEpoch": "-1", "StartOffset": "0",
                                      "LastTimestamp": "1764125000000", "Duration(min)": "0"}]
    assert hu.parse_table(TABLE[:1]) == [] and hu.parse_table([]) == []


def _nem(f, value):
    return [{"process": "nemesis", "type": "info", "f": f, "value": value}] * 2


def _sample(lso, hw):
    return {"process": "monitor", "type": "info", "f": "offsets", "value": [[0, lso, hw]]}


INIT = [{"process": 0, "type": "ok", "f": "init-producer", "value": None,
         "producer": {"pid": 1000, "epoch": 0, "session": "app", "transactional_id": "k20716"}}]


def _history(table=TABLE, after=(3, 3)):
    return (INIT + [_sample(2, 2), _sample(0, 3), _sample(0, 3)] + _nem("start-abort-hanging", {"find-hanging": table})
            + [_sample(*after)] + _nem("stop-abort-hanging", {"abort": []}) + [_sample(*after)])


def test_the_facts_hold_on_a_good_history():
    ops = _history()
    assert hu.find_hanging_named_it(ops) is None
    assert hu.abort_moved_lso(ops) is None


def test_find_hanging_fact_fails_when_it_names_nothing_or_another_producer():
    assert hu.find_hanging_named_it(INIT) is not None                     # never ran
    assert hu.find_hanging_named_it(_history(table=TABLE[:1])) is not None
    other = [TABLE[0], TABLE[1].replace("1000      ", "2000      ")]
    assert hu.find_hanging_named_it(_history(table=other)) is not None


STATE = {"transactional_id": "k20716-3", "state": "CompleteCommit", "producer_id": 1000, "producer_epoch": 0,
         "partitions": []}
KILL = _nem("kill", "broker-2")


def test_coordinator_fact_needs_a_complete_commit_recorded_before_the_kill():
    assert hu.coordinator_completed(_nem("transaction-state", STATE) + KILL) is None
    assert hu.coordinator_completed(KILL + _nem("transaction-state", STATE)) is not None
    prepare = dict(STATE, state="PrepareCommit", partitions=["hang-unclean-0"])
    assert hu.coordinator_completed(_nem("transaction-state", prepare) + KILL) is not None
    assert hu.coordinator_completed(KILL) is not None


def test_abort_fact_fails_when_the_lso_stands_or_nothing_was_aborted():
    assert hu.abort_moved_lso(_history(after=(0, 3))) is not None
    assert hu.abort_moved_lso(INIT + [_sample(0, 3)]) is not None
