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


def _newest_differing_release(sc):
    from eoslab import kafka_version
    differ = [v for v in kafka_version.names() if sc.expected_for(v) != sc.expected_for(None)]
    return differ[-1] if differ else None


VERSIONED = [pytest.param(s, _newest_differing_release(s), id=f"{s.name}-{_newest_differing_release(s)}")
             for s in scenarios() if _newest_differing_release(s) and not s.slow]


@pytest.mark.parametrize("sc,version", VERSIONED)
def test_scenarios_whose_verdict_depends_on_the_release_give_that_releases_verdict(sc, version, tmp_path,
                                                                                    eoslab_home):
    """The releases a scenario names differently (the default one is covered above)."""
    o = run_scenario(sc, str(tmp_path), home=eoslab_home, kafka_version=version)
    assert o.error is None, o.error
    assert o.expected == sc.expected_for(version) and o.observed == o.expected, o.line()
    assert all(v is None for v in o.facts.values()), o.facts
    r = json.loads((tmp_path / sc.name / "results.json").read_text())
    assert r["scenario"]["kafka_version"] == version
