"""G0 and G1c: dependency cycles derived from offsets, with shortest-cycle witnesses."""
from pathlib import Path

import pytest

from checker.kafka import check_kafka
from checker.kafka.cycles import _shortest_cycle, tarjan

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"


def test_g0_write_cycle_is_found_and_allowed():
    # T1 (op 2) is before T2 (op 3) on key a, after it on key b
    r = check_kafka(DATA / "g0.jsonl")
    assert r["valid"] is True and r["anomalies"] == {}
    (w,) = r["allowed"]["G0"]
    assert sorted(w["cycle"][:2]) == [2, 3] and w["cycle"][0] == w["cycle"][-1]
    steps = {(s["from"], s["to"], s["key"]): s for s in w["steps"]}
    assert steps[(2, 3, "a")]["offsets"] == [0, 1]
    assert steps[(3, 2, "b")]["offsets"] == [0, 1]
    assert all(s["type"] == "ww" for s in w["steps"])
    assert sorted(o["index"] for o in w["ops"]) == [2, 3]


def test_g1c_read_cycle_is_invalid_with_both_wr_steps():
    # T1 (op 2) read T2's write on b, T2 (op 3) read T1's write on a
    r = check_kafka(DATA / "g1c.jsonl")
    assert r["valid"] is False
    (w,) = r["anomalies"]["G1c"]
    assert len(w["steps"]) == 2 and {s["type"] for s in w["steps"]} == {"wr"}
    steps = {(s["from"], s["to"]): s for s in w["steps"]}
    assert steps[(2, 3)]["key"] == "a" and steps[(2, 3)]["offset"] == 0 and steps[(2, 3)]["value"] == 1
    assert steps[(3, 2)]["key"] == "b" and steps[(3, 2)]["value"] == 2
    # each op's summary keeps its send and its poll: the edges of the cycle are visible in it
    for op in w["ops"]:
        assert [m[0] for m in op["value"]] == ["send", "poll"]


def test_g1c_through_a_bridge_send_with_a_ww_step_is_allowed():
    # T1 sends a@0, b@1; W sends a@1; T2 polls W's a@1 and sends b@0:
    # T1 -ww(a)-> W -wr(a)-> T2 -ww(b)-> T1
    ops = [
        {"process": 0, "type": "invoke", "f": "txn", "value": [["send", "a", 1], ["send", "b", 2]]},
        {"process": 0, "type": "ok", "f": "txn", "value": [["send", "a", [0, 1]], ["send", "b", [1, 2]]]},
        {"process": 1, "type": "invoke", "f": "send", "value": [["send", "a", 3]]},
        {"process": 1, "type": "ok", "f": "send", "value": [["send", "a", [1, 3]]]},
        {"process": 2, "type": "invoke", "f": "txn", "value": [["poll"], ["send", "b", 4]]},
        {"process": 2, "type": "ok", "f": "txn", "value": [["poll", {"a": [[1, 3]]}], ["send", "b", [0, 4]]]},
        {"process": 3, "type": "invoke", "f": "poll", "value": [["poll"]]},
        {"process": 3, "type": "ok", "f": "poll", "value": [["poll", {"a": [[0, 1], [1, 3]], "b": [[0, 4], [1, 2]]}]]},
    ]
    r = check_kafka(ops)
    assert r["valid"] is True
    g1c = r["allowed"]["G1c"]
    assert len(g1c) == 1
    kinds = [(s["type"], s["from"], s["to"], s["key"]) for s in g1c[0]["steps"]]
    assert ("ww", 1, 3, "a") in kinds and ("wr", 3, 5, "a") in kinds and ("ww", 5, 1, "b") in kinds


def test_single_sends_and_polls_never_make_cycles():
    ops = []
    for i in range(20):
        ops += [{"process": i % 3, "type": "invoke", "f": "send", "value": [["send", i % 2, i]]},
                {"process": i % 3, "type": "ok", "f": "send", "value": [["send", i % 2, [i // 2, i]]]}]
    ops += [{"process": 9, "type": "invoke", "f": "poll", "value": [["poll"]]},
            {"process": 9, "type": "ok", "f": "poll",
             "value": [["poll", {"0": [[i // 2, i] for i in range(0, 20, 2)],
                                  "1": [[i // 2, i] for i in range(1, 20, 2)]}]]}]
    r = check_kafka(ops)
    assert r["valid"] is True and r["allowed"] == {}


def test_tarjan_and_the_shortest_cycle_in_a_component():
    # one component: a long cycle 1..6 and a short cycle 3 -> 4 -> 3
    adj = {1: {2}, 2: {3}, 3: {4}, 4: {5, 3}, 5: {6}, 6: {1}, 7: {1}}
    (comp,) = tarjan(adj)
    assert sorted(comp) == [1, 2, 3, 4, 5, 6]
    cyc = _shortest_cycle(adj, comp)
    assert len(cyc) == 3 and cyc[0] == cyc[-1] and set(cyc) == {3, 4}
    assert tarjan({1: {2}, 2: {3}}) == []


def test_the_witness_does_not_depend_on_the_string_hash_seed(tmp_path):
    """Two transactions ordered one way on nineteen keys and the other way on one: the G0 witness
    names the same keys whatever PYTHONHASHSEED the checker's process runs with (the same history
    gives the same report)."""
    import json
    import os
    import subprocess
    import sys
    keys = [f"key-{i}" for i in range(20)]
    ops = []
    for proc, first in ((0, True), (1, False)):
        sends = [["send", k, 10 * proc + i] for i, k in enumerate(keys)]
        ops.append({"process": proc, "type": "invoke", "f": "txn", "value": sends})
        done = []
        for i, k in enumerate(keys):
            before = first if i else not first          # key-0 has the order the other way round
            done.append(["send", k, [0 if before else 1, 10 * proc + i]])
        ops.append({"process": proc, "type": "ok", "f": "txn", "value": done})
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in ops))
    code = ("import json, sys; from checker.kafka import check_kafka; "
            "r = check_kafka(sys.argv[1]); print(json.dumps(r['allowed']['G0'][0]['steps'], sort_keys=True))")
    root = Path(__file__).resolve().parents[2]
    seen = {subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                           cwd=root, env=dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(root))).stdout
            for seed in range(6)}
    assert len(seen) == 1, seen
