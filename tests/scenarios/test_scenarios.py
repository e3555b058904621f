"""Every scenario against a real cluster: the checker's verdict on the recorded history must be the
expected one, and every extra fact must hold (cluster.scenarios). Slow ones only under `make chaos`."""
import json
import os

import pytest

from cluster.scenarios import scenarios
from cluster.scenarios.runner import run_scenario

pytestmark = pytest.mark.integration

PARAMS = [pytest.param(s, id=s.name, marks=[pytest.mark.slow] if s.slow else []) for s in scenarios()]


@pytest.mark.parametrize("sc", PARAMS)
def test_scenario_verdict_is_the_expected_one(sc, tmp_path, eoslab_home):
    o = run_scenario(sc, str(tmp_path), home=eoslab_home)     # on the default Kafka version
    expected = sc.expected_for(None)
    if not o.match:      # the nodes' logs are kept on a mismatch: show their tails
        logs = tmp_path / sc.name / "logs"
        for f in sorted(logs.glob("*.log")) if logs.is_dir() else ():
            print(f"--- {f.name} ---\n" + "".join(f.read_text(errors="replace").splitlines(True)[-30:]))
    assert o.error is None, o.error
    assert o.observed == expected, o.line()
    assert all(v is None for v in o.facts.values()), o.facts
    assert set(o.facts) == {f.name for f in sc.facts}
    out = tmp_path / sc.name
    assert {"history.jsonl", "results.json", "report.html"} <= set(os.listdir(out))
    assert not (out / "logs").exists()            # matched, no --keep: logs removed
    r = json.loads((out / "results.json").read_text())
    assert sorted(r["anomalies"]) == sorted(expected)          # what the checker wrote, not what we expect
    assert r["scenario"]["match"] is True and r["scenario"]["expected"] == sorted(expected)
