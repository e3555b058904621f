"""cluster.shrink's search without a cluster: ddmin with a fake predicate, the budget, the k-of-n rule,
the size dimensions (processes, records) halved toward their floors, and the run folders `eoslab shrink`
refuses (one line, exit 2)."""
import json
import random

import pytest

from cluster import shrink as sh
from cluster import shrink_dimensions as sd
from eoslab.cli import main

EVENTS = [{"at": float(i * 3), "package": p, "duration": 2.0}
          for i, p in enumerate(["pause", "kill", "lost-ack", "loss", "partition", "kill-leader", "pause", "loss"])]


def caused_by(*idx):
    """A predicate: the subset holds every event of `idx` (by position in EVENTS)."""
    need = {id(EVENTS[i]) for i in idx}
    return lambda sub: need <= {id(e) for e in sub}


@pytest.mark.parametrize("cause", [(2,), (5,), (0,), (7,), (1, 6), (3, 4), (0, 7)])
def test_ddmin_finds_the_cause_among_eight(cause):
    calls = []
    pred = caused_by(*cause)
    got = sh.ddmin(EVENTS, lambda sub: calls.append(len(sub)) or pred(sub))
    assert [EVENTS.index(e) for e in got] == sorted(cause)
    assert 0 not in calls and len(calls) <= 20


def test_ddmin_tests_each_subset_once():
    seen = []
    sh.ddmin(EVENTS, lambda sub: seen.append(tuple(id(e) for e in sub)) or caused_by(1, 6)(sub))
    assert len(seen) == len(set(seen))


def test_ddmin_respects_the_budget_and_returns_the_smallest_found():
    budget = sh.Budget(runs=3)
    pred = caused_by(5)

    def test(sub):
        assert budget.spend(), "tested beyond the budget"
        return pred(sub)
    got = sh.ddmin(EVENTS, test, budget)
    assert budget.used == 3 and budget.cut
    assert id(EVENTS[5]) in {id(e) for e in got} and len(got) < len(EVENTS)


def test_budget_in_minutes():
    now = [0.0]
    b = sh.Budget(runs=100, minutes=1, t0=0.0, clock=lambda: now[0])
    assert b.spend()
    now[0] = 61
    assert not b.spend() and b.used == 1


def test_k_of_n_stops_at_k_hits_and_when_k_is_out_of_reach():
    seq = iter([False, True, True])
    v = sh.k_of_n(lambda: next(seq), tries=3, need=1, budget=sh.Budget(runs=10))
    assert (v.reproduced, v.hits, v.tries) == (True, 1, 2)
    v = sh.k_of_n(lambda: False, tries=3, need=2, budget=sh.Budget(runs=10))
    assert (v.reproduced, v.hits, v.tries) == (False, 0, 2)        # after 2 misses, 2 of 3 is out of reach
    seq = iter([True, False, True])
    v = sh.k_of_n(lambda: next(seq), tries=3, need=2, budget=sh.Budget(runs=10))
    assert (v.reproduced, v.hits, v.tries) == (True, 2, 3)


def test_k_of_n_with_the_budget_spent_does_not_reproduce():
    b = sh.Budget(runs=1)
    v = sh.k_of_n(lambda: False, tries=3, need=1, budget=b)
    assert (v.reproduced, v.tries, v.complete, b.used) == (False, 1, False, 1)


def test_ddmin_with_a_flaky_cause_and_k_of_n():
    """The cause reproduces in 1 of 2 replays: with 1 of 3 tries ddmin still finds it."""
    rng = random.Random(7)
    pred = caused_by(2)
    budget = sh.Budget(runs=60)
    got = sh.ddmin(EVENTS, lambda sub: sh.k_of_n(lambda: pred(sub) and rng.random() < 0.5, 3, 1, budget).reproduced,
                   budget)
    assert [EVENTS.index(e) for e in got] == [2]
    assert budget.used <= 60 and not budget.cut


def test_short_limit_and_command():
    assert sh.short_limit([{"at": 2.0, "package": "lost-ack", "duration": 3.0}], 30) == 2 + 3 + sh.MARGIN_S
    assert sh.short_limit([{"at": 25.0, "package": "lost-ack", "duration": 4.0}], 26) == 26
    cmd = sh.run_command({"workload": "queue", "seed": 3, "nemesis": ["lost-ack"], "settings": {"acks": "1"},
                          "client": "eoslab"}, "s.json", 8, "out")
    assert cmd[:2] == ["eoslab", "run"] and "--schedule" in cmd and ["--set", "acks=1"] == cmd[cmd.index("--set"):][:2]


def _run_dir(tmp_path, name, results, schedule=({"at": 1, "package": "lost-ack", "duration": 2},)):
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"workload": "queue", "seed": 1, "time_limit": 10,
                                            "schedule": list(schedule)}))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


@pytest.mark.parametrize("name,results,schedule,says", [
    ("valid", {"verdict": "valid", "anomalies": {}}, None, "not 'invalid'"),
    ("lab", {"verdict": "lab-error", "lab_errors": [{"kind": "run"}], "anomalies": {}}, None, "lab-error"),
    ("unjudged", None, None, "no results.json"),
    ("nofaults", {"verdict": "invalid", "anomalies": {"duplicate": [{}]}}, [], "no fault schedule"),
])
def test_cli_refuses_bad_run_folders(tmp_path, capsys, name, results, schedule, says):
    d = _run_dir(tmp_path, name, results, *([] if schedule is None else [schedule]))
    assert main(["shrink", str(d), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_cli_refuses_a_folder_without_run_json_and_bad_flags(tmp_path, capsys):
    assert main(["shrink", str(tmp_path)]) == 2
    assert "no run.json" in capsys.readouterr().err
    d = _run_dir(tmp_path, "r", {"verdict": "invalid", "anomalies": {"duplicate": [{}]}})
    assert main(["shrink", str(d), "--tries", "2", "--need", "3", "--out", str(tmp_path / "o")]) == 2
    assert "need 1 <= K <= N" in capsys.readouterr().err


@pytest.mark.parametrize("text,says", [
    ("not json", "not JSON"),
    ('{"a": 1}', "expected a JSON list"),
    ('[{"at": 1, "package": "nope", "duration": 1}]', "unknown fault package"),
    ('[{"at": 1, "package": "kill", "duration": 0}]', "duration"),
    ('[{"at": 3, "package": "kill", "duration": 1}, {"at": 1, "package": "kill", "duration": 1}]', "order"),
    ('[{"at": 30, "package": "kill", "duration": 1}]', "time limit"),
])
def test_run_refuses_a_bad_schedule_file(tmp_path, capsys, text, says):
    f = tmp_path / "s.json"
    f.write_text(text)
    assert main(["run", "--workload", "queue", "--time-limit", "10", "--schedule", str(f),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_schedule_file_takes_a_run_json(tmp_path):
    from cluster import run_schedule
    f = tmp_path / "run.json"
    f.write_text(json.dumps({"schedule": [{"at": 1.5, "package": "lost-ack", "duration": 2}]}))
    assert run_schedule.load(str(f), 10) == [run_schedule.nem.Event(1.5, "lost-ack", 2.0)]


def test_shrinker_end_to_end_with_fake_replays(tmp_path, monkeypatch):
    """The whole Shrinker (candidates, minimal copy, shrink.json, summary) with replays faked: the
    anomaly needs the lost-ack alone."""
    sched = [dict(e) for e in EVENTS[:4]]
    d = _run_dir(tmp_path, "run", {"verdict": "invalid", "anomalies": {"duplicate": [{}]}}, sched)
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, time_limit=30)))

    def once(self, cand_dir, sched_file, time_limit, k, seen, meta):
        with open(sched_file) as f:
            played = json.load(f)
        hit = any(e["package"] == "lost-ack" for e in played)
        out = tmp_path / "fake" / f"{len(self.candidates)}-{k}"
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps({"verdict": "invalid" if hit else "valid",
                                                      "anomalies": {"duplicate": [{}]} if hit else {}}))
        (out / "run.json").write_text(json.dumps({"schedule": played}))
        if hit:
            seen.append(str(out))
        return hit
    monkeypatch.setattr(sh.Shrinker, "_once", once)
    doc = sh.Shrinker(str(d), sh.Options(out=str(tmp_path / "o"), budget_runs=10)).shrink()
    assert [e["package"] for e in doc["minimal"]["schedule"]] == ["lost-ack"]
    assert doc["minimal"]["time_limit"] == 6 + 2 + sh.MARGIN_S and doc["reproduction"] == {"hits": 1, "tries": 1}
    assert not doc["budget_cut_search"] and doc["runs_used"] <= 10
    saved = json.loads((tmp_path / "o" / "shrink.json").read_text())
    assert saved["minimal"]["schedule"] == doc["minimal"]["schedule"] and "--schedule" in saved["replay"]
    assert "lost-ack at 6 s for 2 s" in doc["summary"] and "Replay: eoslab run" in doc["summary"]
    assert json.loads((tmp_path / "o" / "minimal" / "results.json").read_text())["anomalies"]["duplicate"]


def test_no_candidate_once_the_budget_is_spent(tmp_path, monkeypatch):
    """ddmin asks for more candidates in a round than the budget has: those are not recorded (no
    folder, no empty entry in shrink.json), and the search is marked cut."""
    sched = [dict(e) for e in EVENTS[:4]]
    d = _run_dir(tmp_path, "run", {"verdict": "invalid", "anomalies": {"duplicate": [{}]}}, sched)

    def once(self, cand_dir, sched_file, time_limit, k, seen, meta):
        with open(sched_file) as f:
            hit = len(json.load(f)) == 4           # only the whole schedule reproduces
        if hit:
            seen.append(str(d))
        return hit
    monkeypatch.setattr(sh.Shrinker, "_once", once)
    doc = sh.Shrinker(str(d), sh.Options(out=str(tmp_path / "o"), tries=2, budget_runs=3)).shrink()
    assert doc["runs_used"] == 3 and doc["budget_cut_search"]
    assert [c["tries"] for c in doc["candidates"]] == [1, 2]
    assert sorted(p.name for p in (tmp_path / "o" / "candidates").iterdir()) == ["001", "002"]


def test_a_run_whose_original_schedule_does_not_reproduce_is_not_shrunk(tmp_path, monkeypatch):
    """The original schedule is replayed first; when it does not reproduce, no smaller candidate is
    tried and the summary says why (a smaller "reproduction" would then be chance)."""
    sched = [dict(e) for e in EVENTS[:4]]
    d = _run_dir(tmp_path, "run", {"verdict": "invalid", "anomalies": {"duplicate": [{}]}}, sched)
    played = []

    def once(self, cand_dir, sched_file, time_limit, k, seen, meta):
        with open(sched_file) as f:
            played.append(len(json.load(f)))
        return False
    monkeypatch.setattr(sh.Shrinker, "_once", once)
    doc = sh.Shrinker(str(d), sh.Options(out=str(tmp_path / "o"), budget_runs=10)).shrink()
    assert played and set(played) == {4}                      # only the original schedule was replayed
    assert doc["original_reproduced"] is False and len(doc["candidates"]) == 1
    assert doc["minimal"]["schedule"] == sched
    assert "did not reproduce duplicate when replayed" in doc["summary"] and "nothing to shrink" in doc["summary"]


# ---- the size dimensions --------------------------------------------------------------------------

def _dims(meta):
    return {d.name: (d.flag, d.original, d.floor) for d in sd.of_run(meta)}


def test_dimensions_are_the_ones_a_run_has():
    assert _dims({"workload": "queue", "concurrency": 4, "partitions": 3}) == {
        "processes": ("--concurrency", 4, 1), "partitions": ("--partitions", 3, 1)}
    assert _dims({"workload": "txn", "concurrency": 4, "settings": {"workload.max-sends": "6"}}) == {
        "processes": ("--concurrency", 4, 1), "records": ("workload.max-sends", 6, 1)}
    assert _dims({"workload": "txn", "concurrency": 2}) == {          # the workload's default max-sends, 4
        "processes": ("--concurrency", 2, 1), "records": ("workload.max-sends", 4, 1)}
    assert _dims({"workload": "copier", "concurrency": 4}) == {       # its processes are its copiers
        "processes": ("workload.copiers", 2, 1), "records": ("workload.input-rate", 100.0, 10.0)}
    assert _dims({"workload": "zombie", "concurrency": 4, "settings": {"workload.slots": "1"}}) == {
        "records": ("workload.max-sends", 3, 1)}                     # slots already at the floor
    assert _dims({"workload": "queue", "concurrency": 1}) == {}
    assert _dims({"workload": "txn", "concurrency": 4, "settings": {"workload.max-sends": "x"}}) == {
        "processes": ("--concurrency", 4, 1)}                        # not a number: left alone
    assert _dims({"workload": "nope", "concurrency": 4}) == {}


def test_search_halves_each_dimension_toward_its_floor_while_it_reproduces():
    dims = sd.of_run({"workload": "txn", "concurrency": 12, "settings": {"workload.max-sends": "8"}})
    tried = []

    def test(values):
        tried.append(dict(values))
        return values["concurrency"] >= 3            # the anomaly needs three processes; any record count
    got = sd.search(dims, test, sh.Budget(runs=100))
    assert got == {"concurrency": 3, "workload.max-sends": 1}
    assert [t["concurrency"] for t in tried] == [6, 3, 1, 3, 3, 3]
    assert [t["workload.max-sends"] for t in tried] == [8, 8, 8, 4, 2, 1]


def test_search_floats_and_the_budget():
    dims = sd.of_run({"workload": "copier", "concurrency": 4, "settings": {"workload.copiers": "1"}})
    rates = []
    assert sd.search(dims, lambda v: rates.append(v["workload.input-rate"]) or True,
                     sh.Budget(runs=100)) == {"workload.input-rate": 10.0}
    assert rates == [50.0, 25.0, 12.5, 10.0]
    budget = sh.Budget(runs=1)

    def test(values):
        assert budget.spend()
        return True
    dims = sd.of_run({"workload": "queue", "concurrency": 8})
    assert sd.search(dims, test, budget) == {"concurrency": 4} and budget.cut


def test_apply_gives_the_replay_command_the_values():
    meta = {"workload": "txn", "seed": 1, "concurrency": 4, "settings": {"acks": "all"}}
    cmd = sh.run_command(sd.apply(meta, {"concurrency": 1, "workload.max-sends": 2}), "s.json", 9, "out")
    assert cmd[cmd.index("--concurrency") + 1] == "1"
    fewer = sh.run_command(sd.apply(dict(meta, partitions=3), {"partitions": 1}), "s.json", 9, "out")
    assert fewer[fewer.index("--partitions") + 1] == "1"
    assert "workload.max-sends=2" in cmd and "acks=all" in cmd
    assert meta == {"workload": "txn", "seed": 1, "concurrency": 4, "settings": {"acks": "all"}}   # unchanged


def test_shrinker_shrinks_processes_and_records_with_fake_replays(tmp_path, monkeypatch):
    """A txn run whose anomaly needs the delayed EndTxn and two processes: the schedule shrinks to it,
    then the processes halve to 2 (1 does not reproduce) and the records per transaction to 1."""
    sched = [{"at": 0.5, "package": "pause", "duration": 1.0}, {"at": 2.0, "package": "delay-end-txn", "duration": 4.0},
             {"at": 6.5, "package": "loss", "duration": 1.0}, {"at": 8.0, "package": "pause", "duration": 1.0}]
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"workload": "txn", "seed": 1, "time_limit": 12, "concurrency": 4,
                                            "partitions": 3, "kafka_version": "3.6", "schedule": sched,
                                            "settings": {"workload.abort-ratio": "0.5"}}))
    (d / "results.json").write_text(json.dumps({"verdict": "invalid", "anomalies": {"G1a": [{}]}}))
    played = []

    def once(self, cand_dir, sched_file, time_limit, k, seen, meta):
        with open(sched_file) as f:
            events = json.load(f)
        played.append((len(events), time_limit, meta["concurrency"], meta["settings"].get("workload.max-sends")))
        hit = any(e["package"] == "delay-end-txn" for e in events) and meta["concurrency"] >= 2
        out = tmp_path / "fake" / f"{len(self.candidates)}-{k}"
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps({"verdict": "invalid" if hit else "valid",
                                                      "anomalies": {"G1a": [{}]} if hit else {}}))
        (out / "run.json").write_text(json.dumps(dict(meta, schedule=events, time_limit=time_limit)))
        if hit:
            seen.append(str(out))
        return hit
    monkeypatch.setattr(sh.Shrinker, "_once", once)
    doc = sh.Shrinker(str(d), sh.Options(out=str(tmp_path / "o"), tries=2, budget_runs=20)).shrink()
    assert [e["package"] for e in doc["minimal"]["schedule"]] == ["delay-end-txn"]
    assert doc["minimal"]["time_limit"] == 2 + 4 + sh.MARGIN_S
    assert doc["dimensions"] == {
        "processes": {"setting": "--concurrency", "what": "processes", "original": 4, "minimal": 2},
        "records": {"setting": "workload.max-sends", "what": "records per transaction", "original": 4,
                    "minimal": 1},
        "partitions": {"setting": "--partitions", "what": "partitions", "original": 3, "minimal": 1}}
    assert played[-6:] == [(1, 9.0, 2, "4"), (1, 9.0, 1, "4"), (1, 9.0, 1, "4"), (1, 9.0, 2, "2"), (1, 9.0, 2, "1"),
                           (1, 9.0, 2, "1")]          # the last: one partition
    assert not doc["budget_cut_search"]
    saved = json.loads((tmp_path / "o" / "shrink.json").read_text())
    assert saved["dimensions"] == doc["dimensions"]
    replay = saved["replay"].split()
    assert replay[replay.index("--concurrency") + 1] == "2" and "workload.max-sends=1" in replay
    assert replay[replay.index("--partitions") + 1] == "1"
    assert "workload.abort-ratio=0.5" in replay and replay[replay.index("--kafka-version") + 1] == "3.6"
    assert "processes 4 -> 2 (--concurrency)" in doc["summary"]
    assert "records per transaction 4 -> 1 (workload.max-sends)" in doc["summary"]
    minimal = json.loads((tmp_path / "o" / "minimal" / "run.json").read_text())
    assert minimal["concurrency"] == 2 and minimal["settings"]["workload.max-sends"] == "1"
    assert minimal["partitions"] == 1 and "partitions 3 -> 1 (--partitions)" in doc["summary"]


def _typed_run(tmp_path, sched):
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"workload": "queue", "seed": 1, "time_limit": 12, "concurrency": 1,
                                            "schedule": sched}))
    (d / "results.json").write_text(json.dumps({"verdict": "invalid",
                                                "anomalies": {"inconsistent-offsets": [{}], "lost-write": [{}]}}))
    return d


@pytest.mark.parametrize("anomalies,kept", [((), "pause"), (("lost-write",), "kill-leader")])
def test_anomaly_types_that_count(tmp_path, monkeypatch, anomalies, kept):
    """With --anomaly lost-write a candidate counts only when it shows a lost write: the pause alone,
    which shows only inconsistent offsets here, is not the minimal run."""
    sched = [{"at": 0.5, "package": "pause", "duration": 1.0}, {"at": 2.0, "package": "kill-leader", "duration": 3.0}]
    d = _typed_run(tmp_path, sched)

    def once(self, cand_dir, sched_file, time_limit, k, seen, meta):
        with open(sched_file) as f:
            packages = {e["package"] for e in json.load(f)}
        found = {"inconsistent-offsets": [{}]} if "pause" in packages else {}
        found.update({"lost-write": [{}]} if "kill-leader" in packages else {})
        out = tmp_path / "fake" / f"{len(self.candidates)}-{k}"
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps({"verdict": "invalid", "anomalies": found}))
        hit = bool(set(found) & set(self.types))
        if hit:
            seen.append(str(out))
        return hit
    monkeypatch.setattr(sh.Shrinker, "_once", once)
    doc = sh.Shrinker(str(d), sh.Options(out=str(tmp_path / "o"), budget_runs=10, anomalies=anomalies)).shrink()
    assert [e["package"] for e in doc["minimal"]["schedule"]] == [kept]
    assert doc["anomaly_types"] == (list(anomalies) or ["inconsistent-offsets", "lost-write"])


def test_cli_refuses_an_anomaly_type_the_run_does_not_show(tmp_path, capsys):
    d = _typed_run(tmp_path, [{"at": 1, "package": "kill-leader", "duration": 2}])
    assert main(["shrink", str(d), "--anomaly", "G1a", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "shows no G1a (it shows inconsistent-offsets, lost-write)" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_eoslab_run_takes_the_partitions_a_replay_carries(capsys):
    from eoslab.cli import build_parser, main
    args = build_parser().parse_args(["run", "--workload", "queue", "--partitions", "1", "--out", "o"])
    assert args.partitions == 1
    assert build_parser().parse_args(["run", "--workload", "queue", "--out", "o"]).partitions == 3
    with pytest.raises(SystemExit) as e:
        main(["run", "--workload", "queue", "--partitions", "0", "--out", "o"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--partitions" in err and "unrecognized" not in err
