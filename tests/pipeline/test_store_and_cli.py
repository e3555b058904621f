"""Finding runs in a store, and the bad-input contract of `eoslab analyze` / `eoslab sweep`:
one line on stderr, exit 2, no traceback, nothing on stdout (no Spark is started for these)."""
from __future__ import annotations

import json
import os

import pytest

from pipeline import synth
from pipeline.store import StoreError, config_label, fault_label, find_runs

pytestmark = pytest.mark.fast


def _run(d, **kw):
    synth.write_run(str(d), n_ops=kw.pop("n_ops", 30), seed=kw.pop("seed", 1), **kw)


def test_finds_nested_runs_sorted_with_labels(tmp_path):
    _run(tmp_path / "b" / "s1", settings={"acks": "all", "enable.idempotence": "true"}, nemesis=["kill", "pause"])
    _run(tmp_path / "a", nemesis=["none"])
    (tmp_path / ".hidden").mkdir()
    _run(tmp_path / ".hidden" / "x")
    runs = find_runs(str(tmp_path))
    assert [r.run for r in runs] == ["a", "b/s1"]
    a, b = runs
    assert (a.config, a.fault, a.seed, a.report) == ("(defaults)", "none", 1, None)
    assert (b.config, b.fault) == ("acks=all enable.idempotence=true", "kill+pause")
    assert b.history == str(tmp_path / "b" / "s1" / "history.jsonl") and b.size > 0


def test_output_inside_the_store_is_not_a_run(tmp_path):
    _run(tmp_path / "r")
    _run(tmp_path / "out" / "old")
    assert [r.run for r in find_runs(str(tmp_path), skip=(str(tmp_path / "out"),))] == ["r"]


@pytest.mark.parametrize("make, msg", [
    (lambda p: None, "no such store directory"),
    (lambda p: p.mkdir(), "no runs"),
    (lambda p: p.write_text("x"), "is not a directory"),
])
def test_store_itself_bad(tmp_path, make, msg):
    p = tmp_path / "store"
    make(p)
    with pytest.raises(StoreError, match=msg):
        find_runs(str(p))


def test_run_without_history_or_run_json_or_with_bad_run_json(tmp_path):
    _run(tmp_path / "r1")
    os.remove(tmp_path / "r1" / "history.jsonl")
    with pytest.raises(StoreError, match=r"^run r1: no history.jsonl"):
        find_runs(str(tmp_path))
    _run(tmp_path / "r1")
    os.remove(tmp_path / "r1" / "run.json")
    with pytest.raises(StoreError, match=r"^run r1: no run.json"):
        find_runs(str(tmp_path))
    (tmp_path / "r1" / "run.json").write_text("[1, 2")
    with pytest.raises(StoreError, match=r"^run r1: run.json is not valid JSON"):
        find_runs(str(tmp_path))
    (tmp_path / "r1" / "run.json").write_text('{"settings": [1]}')
    with pytest.raises(StoreError, match="'settings' is not an object"):
        find_runs(str(tmp_path))


def test_labels():
    assert config_label({}) == "(defaults)"
    assert config_label({"b": "2", "a": "1"}) == "a=1 b=2"
    assert fault_label(["none"]) == fault_label([]) == fault_label(None) == "none"
    assert fault_label("kill,partition") == "kill+partition"


def _one_line_exit_2(capsys, argv):
    """main() returns 2, or (argparse's own checks) exits 2, with one line on stderr."""
    from eoslab.cli import main
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    cap = capsys.readouterr()
    assert rc == 2, cap
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eoslab: ") and "Traceback" not in cap.err
    return lines[0]


def test_cli_analyze_missing_store(tmp_path, capsys):
    line = _one_line_exit_2(capsys, ["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert "no such store directory" in line


def test_cli_analyze_run_without_history(tmp_path, capsys):
    _run(tmp_path / "s" / "r1")
    os.remove(tmp_path / "s" / "r1" / "history.jsonl")
    line = _one_line_exit_2(capsys, ["analyze", str(tmp_path / "s"), "--out", str(tmp_path / "o")])
    assert "run r1: no history.jsonl" in line


def test_cli_analyze_bad_master_and_conf(tmp_path, capsys):
    _run(tmp_path / "s" / "r1")
    line = _one_line_exit_2(capsys, ["analyze", str(tmp_path / "s"), "--out", str(tmp_path / "o"),
                                     "--master", "yarn"])
    assert "--master 'yarn'" in line
    line = _one_line_exit_2(capsys, ["analyze", str(tmp_path / "s"), "--out", str(tmp_path / "o"),
                                     "--conf", "novalue"])
    assert "KEY=VALUE" in line


def test_cli_analyze_out_is_a_file(tmp_path, capsys):
    _run(tmp_path / "s" / "r1")
    (tmp_path / "o").write_text("")
    line = _one_line_exit_2(capsys, ["analyze", str(tmp_path / "s"), "--out", str(tmp_path / "o")])
    assert "not a directory" in line


def test_cli_sweep_bad_matrix_and_fault(tmp_path, capsys):
    m = tmp_path / "m.json"
    m.write_text('{"matrix": {"acks": []}}')
    base = ["sweep", "--workload", "queue", "--nemesis", "kill", "--seeds", "1", "--out", str(tmp_path / "st")]
    assert "non-empty list" in _one_line_exit_2(capsys, base + ["--settings-matrix", str(m)])
    m.write_text('{"acks": ["1"]}')
    line = _one_line_exit_2(capsys, ["sweep", "--workload", "queue", "--nemesis", "meteor", "--seeds", "1",
                                     "--settings-matrix", str(m), "--out", str(tmp_path / "st")])
    assert "unknown fault package 'meteor'" in line
    line = _one_line_exit_2(capsys, ["sweep", "--workload", "nope", "--nemesis", "kill", "--seeds", "1",
                                     "--settings-matrix", str(m), "--out", str(tmp_path / "st")])
    assert "unknown workload" in line
    assert "--seeds" in _one_line_exit_2(capsys, base[:6] + ["0", "--out", "x", "--settings-matrix", str(m)])


def test_cli_sweep_dry_run_lists_every_run(tmp_path, capsys):
    from eoslab.cli import main
    m = tmp_path / "m.toml"
    m.write_text('[matrix]\nacks = ["1", "all"]\n"enable.idempotence" = [true, false]\n'
                 '[[exclude]]\nacks = "1"\n"enable.idempotence" = true\n')
    rc = main(["sweep", "--workload", "queue", "--nemesis", "kill", "--nemesis", "partition,lost-ack",
               "--settings-matrix", str(m), "--seeds", "2", "--first-seed", "5", "--out", str(tmp_path / "st"),
               "--dry-run"])
    runs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0 and len(runs) == 2 * 3 * 2
    assert {r["seed"] for r in runs} == {5, 6}
    assert runs[0]["out"] == str(tmp_path / "st" / "queue" / "kill" / "acks=1,enable.idempotence=false" / "seed-5")
    assert runs[-1]["nemesis"] == ["partition", "lost-ack"]
    assert not (tmp_path / "st").exists()


def test_cli_sweep_refused_cell_named_or_left_out(tmp_path, capsys):
    from eoslab.cli import main
    m = tmp_path / "m.json"
    m.write_text('{"matrix": {"acks": ["1", "all"], "enable.idempotence": [true, false]}}')
    base = ["sweep", "--workload", "queue,txn", "--nemesis", "kill", "--settings-matrix", str(m), "--seeds", "1",
            "--out", str(tmp_path / "st"), "--dry-run"]
    line = _one_line_exit_2(capsys, base)
    assert "queue | kill | acks=1 enable.idempotence=true: enable.idempotence" in line   # the producer's
    assert "needs acks=all" in line                                                         # own words follow
    assert main(base + ["--skip-invalid"]) == 0
    cap = capsys.readouterr()
    runs = [json.loads(x) for x in cap.out.splitlines()]
    assert len(runs) == 2 * 3 and {r["workload"] for r in runs} == {"queue", "txn"}
    assert cap.err.count("left out (refused)") == 2


def test_the_documented_seeds_matrix_plans_as_documented(tmp_path, capsys):
    """docs/analysis.md's seeds.toml: valid for `eoslab run`, and the run count the page states."""
    import re
    from pathlib import Path

    from eoslab.cli import main
    doc = (Path(__file__).resolve().parents[2] / "docs" / "analysis.md").read_text()
    toml = re.search(r"```toml\n(.*?)```", doc, re.S).group(1)
    m = tmp_path / "seeds.toml"
    m.write_text(toml)
    rc = main(["sweep", "--workload", "queue", "--workload", "txn", "--nemesis", "kill-leader", "--nemesis",
               "lost-ack", "--nemesis", "partition", "--settings-matrix", str(m), "--seeds", "5",
               "--out", str(tmp_path / "st"), "--dry-run"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    runs = cap.out.splitlines()
    stated = re.search(r"That is (\d+) cells × 2 workloads × 3 fault packages × 5 seeds = ([\d,]+) runs", doc)
    assert len(runs) == int(stated.group(2).replace(",", "")) == int(stated.group(1)) * 2 * 3 * 5
