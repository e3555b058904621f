"""`eoslab scenario` without a cluster: the listing, readable one-line errors and their exit codes."""
import pytest

from cluster.scenarios import get, scenarios
from cluster.scenarios.base import ClusterSpec, register
from eoslab.cli import main

pytestmark = pytest.mark.fast


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_list_names_every_scenario_with_its_expectation(capsys):
    rc, out, err = run(capsys, "scenario", "list")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == len(scenarios()) >= 11
    for sc, line in zip(scenarios(), lines):
        assert line.startswith(sc.name + " ") and sc.expectation() in line and sc.description in line


def test_the_issue_s_scenarios_are_there_with_their_expected_anomalies():
    expected = {
        "lost-ack-5-in-flight": set(), "lost-ack-6-in-flight-epoch-bump": {"duplicate"},
        "restart-without-transactional-id": {"duplicate"}, "restart-with-transactional-id": set(),
        "isr-acks1-unclean-election": {"lost-write", "inconsistent-offsets"},
        "isr-acks-all-min-insync-2": set(), "leader-reelection-mid-write": set(),
        "transactional-id-expired": set(), "out-of-order-epoch-bump": {"duplicate"},
        "delayed-end-txn": {"G1a"}, "delayed-end-txn-kip890": set()}
    for name, anomalies in expected.items():
        assert get(name).expected == anomalies, name
    assert {f.name for f in get("restart-with-transactional-id").facts} >= {"zombie fenced"}
    assert {f.name for f in get("transactional-id-expired").facts} == {"new PID at epoch 0"}


def test_unknown_scenario_is_one_line_exit_2(capsys):
    rc, out, err = run(capsys, "scenario", "run", "no-such-scenario")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "unknown scenario 'no-such-scenario'" in err and "lost-ack-5-in-flight" in err


@pytest.mark.parametrize("argv, message", [
    ((), "name a scenario"),
    (("--all", "lost-ack-5-in-flight"), "not both"),
])
def test_run_needs_names_or_all(capsys, argv, message):
    rc, out, err = run(capsys, "scenario", "run", *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and message in err


def test_out_that_is_a_file_is_refused(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    rc, out, err = run(capsys, "scenario", "run", "lost-ack-5-in-flight", "--out", str(f))
    assert rc == 2 and out == "" and "exists and is not a directory" in err


def test_missing_subcommand_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["scenario"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("eoslab: ")


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError):
        register("lost-ack-5-in-flight", seed="-", description="-", cluster=ClusterSpec())(lambda ctx: None)
    assert get("lost-ack-5-in-flight").description != "-"
