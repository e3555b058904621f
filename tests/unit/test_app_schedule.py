"""`eoslab app run --schedule FILE`: the file is `eoslab run --schedule`'s format, with the app faults known too.

Bad files and unknown packages are one line on stderr and exit 2 before anything starts (no output
folder, no cluster); a good file is exactly the schedule the run plays and records.
"""
import json

import pytest

from eoslab.cli import main

pytestmark = pytest.mark.fast


def write(tmp_path, data) -> str:
    f = tmp_path / "s.json"
    f.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(f)


@pytest.mark.parametrize("text,says", [
    ("not json", "not JSON"),
    ('{"at": 1}', "expected a JSON list"),
    ('[{"at": 1, "package": "kill-ap", "duration": 2}]', "unknown fault package 'kill-ap'"),
    ('[{"at": 1, "package": "kill-app"}]', "expected an object"),
    ('[{"at": 3, "package": "kill-app", "duration": 1}, {"at": 1, "package": "pause-app", "duration": 1}]',
     "order"),
    ('[{"at": 30, "package": "kill-app", "duration": 1}]', "time limit"),
])
def test_a_bad_schedule_file_is_one_line_and_exit_2_with_nothing_started(tmp_path, capsys, text, says):
    assert main(["app", "run", "--cmd", "true", "--time-limit", "10", "--schedule", write(tmp_path, text),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_a_missing_schedule_file_is_one_line(tmp_path, capsys):
    assert main(["app", "run", "--cmd", "true", "--schedule", str(tmp_path / "nope.json"),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "nope.json" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_the_schedule_is_played_as_given_with_app_and_cluster_faults(tmp_path):
    from cluster.apps.config import AppRunConfig
    from cluster.nemesis import Event
    f = write(tmp_path, [{"at": 12, "package": "kill-app", "duration": 2},
                         {"at": 20.5, "package": "kill-leader", "duration": 3}])
    cfg = AppRunConfig(cmd="true", out=str(tmp_path / "o"), time_limit=30, seed=5, nemesis=["kill-app"],
                       schedule_file=f)
    cfg.validate()
    assert cfg.events() == [Event(12.0, "kill-app", 2.0), Event(20.5, "kill-leader", 3.0)]
    assert AppRunConfig(cmd="true", out="o", time_limit=30, nemesis=["kill-app"]).events() != cfg.events()


def test_a_run_json_is_taken_as_its_schedule(tmp_path):
    from cluster.apps.config import AppRunConfig
    f = write(tmp_path, {"kind": "app", "schedule": [{"at": 1.5, "package": "zombie-app", "duration": 4}]})
    assert [e.package for e in AppRunConfig(cmd="true", out="o", time_limit=10, schedule_file=f).events()] \
        == ["zombie-app"]


def test_the_app_packages_are_not_known_to_eoslab_run(tmp_path, capsys):
    """The lab's own runs have no application to kill: their schedule still refuses app faults."""
    f = write(tmp_path, [{"at": 1, "package": "kill-app", "duration": 2}])
    assert main(["run", "--workload", "queue", "--time-limit", "10", "--schedule", f,
                 "--out", str(tmp_path / "o")]) == 2
    assert "unknown fault package 'kill-app'" in capsys.readouterr().err
