"""The durability and clock scenarios (cluster/scenarios/durability.py, clock.py): what they expect,
their verdict on the oldest release (test_scenarios.py covers the default one), and the say-why of
the clock jump's fencing in the scenario's results and report. Each cluster test skips with the one
line the lazy filesystem or libfaketime gives where it cannot run here."""
import json

import pytest

from cluster.scenarios import get
from cluster.scenarios.runner import run_scenario

DURABILITY = {"power-loss-isr-default-flush": {"lost-write", "inconsistent-offsets"},
              "power-loss-isr-flush-every-message": set(),
              "torn-tail-cut-and-refetched": set()}
CLOCK = "clock-jump-fences-live-producer"


def _skip_without_lazyfs():
    from cluster.lazyfs import LazyFs
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)


def _skip_without_faketime():
    from cluster import faketime
    try:
        faketime.check()
    except faketime.FaketimeMissing as e:
        pytest.skip(str(e))


@pytest.mark.fast
def test_the_scenarios_expect_the_same_verdict_on_every_release_and_ask_for_their_cluster():
    from eoslab import kafka_version
    for name, expected in DURABILITY.items():
        sc = get(name)
        assert sc.cluster.disk == "lazy" and sc.cluster.brokers == 3, name
        assert all(sc.expected_for(v) == expected for v in kafka_version.names()), name
    sc = get(CLOCK)
    assert sc.cluster.faketime and sc.cluster.txn_coordinators == 1 and sc.expected == frozenset()
    assert {f.name for f in sc.facts} == {"the coordinator aborted it on its timeout", "the producer was fenced"}
    assert "lazy disks" in get("torn-tail-cut-and-refetched").cluster.describe()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DURABILITY))
def test_durability_scenarios_give_their_verdict_on_kafka_0_11(name, tmp_path, eoslab_home):
    _skip_without_lazyfs()
    sc = get(name)
    o = run_scenario(sc, str(tmp_path), home=eoslab_home, kafka_version="0.11")
    assert o.error is None, o.error
    assert o.observed == frozenset(DURABILITY[name]), o.line()
    assert all(v is None for v in o.facts.values()), o.facts
    r = json.loads((tmp_path / name / "results.json").read_text())
    assert r["scenario"]["kafka_version"] == "0.11" and sorted(r["anomalies"]) == sorted(DURABILITY[name])


@pytest.mark.integration
def test_the_clock_jumps_fencing_is_explained_as_the_transaction_timeout(tmp_path, eoslab_home):
    _skip_without_faketime()
    o = run_scenario(get(CLOCK), str(tmp_path), home=eoslab_home)
    assert o.error is None and o.match, o.line()
    out = tmp_path / CLOCK
    r = json.loads((out / "results.json").read_text())
    [why] = r["why"]["fenced"]
    assert why["why"].startswith("fenced by transaction timeout (clock jump on txn-coordinator-1)"), why
    assert why["cause"] == "transaction-timeout" and why["error"] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    html = (out / "report.html").read_text()
    assert "fenced by transaction timeout (clock jump on txn-coordinator-1)" in html
