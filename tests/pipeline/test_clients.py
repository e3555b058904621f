"""The client as a dimension: a settings matrix's `client` is its runs' client (not a producer
setting), the store reads run.json's client and its version (the lab's own for older runs), the
matrix keeps two clients' runs of one cell apart, and the page and the run table show them."""
from __future__ import annotations

import json
import os

import pytest

from pipeline import synth

pytestmark = pytest.mark.fast

CONFLUENT = {"confluent-kafka": "2.6.0", "librdkafka": "2.6.1"}
# run id -> (run.json's client, its "versions", injections); every run: queue, kill, acks=all, Kafka 3.6
RUNS = {
    "queue/kill/old/seed-1": (None, None, {}),                                # before run.json had "client"
    "queue/kill/eoslab/seed-2": ("eoslab", {"eoslab": "0.9.0", "python": "3.12.3"}, {}),
    "queue/kill/confluent-kafka/seed-1": ("confluent-kafka", {"eoslab": "0.9.0", **CONFLUENT}, {"duplicate": 1}),
    "queue/kill/confluent-kafka/seed-2": ("confluent-kafka", {"eoslab": "0.9.0", **CONFLUENT}, {}),
}


def two_client_store(root: str) -> str:
    """Four runs of one cell (workload, settings, faults, Kafka release) by two clients."""
    for rid, (client, versions, inject) in RUNS.items():
        d = os.path.join(root, rid)
        synth.write_run(d, n_ops=300, seed=int(rid[-1]), settings={"acks": "all"}, nemesis=["kill"], inject=inject)
        with open(os.path.join(d, "run.json")) as fh:
            meta = json.load(fh)
        meta["kafka_version"] = "3.6"
        if client:
            meta.update(client=client, versions=versions)
        with open(os.path.join(d, "run.json"), "w") as fh:
            json.dump(meta, fh)
    return root


def _one_line_exit_2(capsys, argv) -> str:
    from eoslab.cli import main
    assert main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in cap.err and not cap.out, cap.err
    return lines[0]


def test_a_cells_client_is_its_runs_client_not_a_setting(tmp_path):
    from pipeline.sweep import plan
    cells = [{"client": "confluent-kafka", "acks": "all"}, {"client": "kafka-python", "acks": "all"},
             {"acks": "all"}]
    runs = plan(["queue"], ["kill"], cells, [0, 1], str(tmp_path), 5.0)
    assert [r.client for r in runs] == ["confluent-kafka"] * 2 + ["kafka-python"] * 2 + ["eoslab"] * 2
    assert all(r.settings == {"acks": "all"} for r in runs)
    assert runs[0].out == str(tmp_path / "queue" / "kill" / "acks=all,client=confluent-kafka" / "seed-0")
    assert len({r.out for r in runs}) == 6
    both = plan(["txn"], ["none"], [{"client": "aiokafka", "kafka.version": "3.0"}], [0], str(tmp_path), 5.0)
    assert (both[0].client, both[0].kafka_version, both[0].settings) == ("aiokafka", "3.0", {})


def test_a_client_the_workload_cannot_drive_is_refused_or_left_out(tmp_path):
    import io

    from pipeline.sweep import plan
    cells = [{"client": "eoslab"}, {"client": "kafka-python"}]
    with pytest.raises(ValueError) as e:
        plan(["queue", "zombie"], ["kill"], cells, [0], str(tmp_path), 5.0)
    assert str(e.value) == "zombie | kill | client=kafka-python: the zombie workload drives eoslab, not kafka-python"
    log = io.StringIO()
    runs = plan(["queue", "zombie"], ["kill"], cells, [0], str(tmp_path), 5.0, skip_invalid=True, log=log)
    assert [(r.workload, r.client) for r in runs] == [("queue", "eoslab"), ("queue", "kafka-python"),
                                                      ("zombie", "eoslab")]
    assert log.getvalue().splitlines() == ["sweep: left out (refused) zombie | kill | client=kafka-python: "
                                           "the zombie workload drives eoslab, not kafka-python"]
    with pytest.raises(ValueError, match=r"^queue \| kill \| client=rdkafka: unknown client 'rdkafka' \(known: "):
        plan(["queue"], ["kill"], [{"client": "rdkafka"}], [0], str(tmp_path), 5.0)


def test_sweep_progress_names_each_runs_client_and_release(tmp_path):
    import io

    from pipeline.sweep import plan, sweep
    cells = [{"client": "confluent-kafka", "kafka.version": "3.6", "acks": "all"}, {"acks": "all"}]
    runs = plan(["queue"], ["kill"], cells, [0], str(tmp_path), 5.0, kafka_version="4.0")
    seen, log = [], io.StringIO()
    got = sweep(runs, log=log, run_fn=lambda cfg, log=None: seen.append((cfg.client, cfg.kafka_version)) or 2)
    assert seen == [("confluent-kafka", "3.6"), ("eoslab", "4.0")] and got["failed"] == 2
    lines = [x.split(" | run: ")[1] for x in log.getvalue().splitlines() if " | run: " in x]
    assert lines == ["queue | kill | acks=all | confluent-kafka, Kafka 3.6 | seed 0",
                     "queue | kill | acks=all | eoslab, Kafka 4.0 | seed 0"]


def test_sweep_cli_names_the_refused_client_cell_in_one_line(tmp_path, capsys):
    from eoslab.cli import main
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"matrix": {"client": ["eoslab", "confluent-kafka"], "kafka.version": ["3.6", "4.0"],
                                        "enable.idempotence": [True]}}))
    base = ["sweep", "--workload", "queue,pid", "--nemesis", "lost-ack", "--settings-matrix", str(m), "--seeds", "1",
            "--out", str(tmp_path / "st"), "--dry-run"]
    line = _one_line_exit_2(capsys, base)
    assert line.endswith("pid | lost-ack | client=confluent-kafka enable.idempotence=true kafka.version=3.6: "
                         "the pid workload drives eoslab, not confluent-kafka")
    assert main(base + ["--skip-invalid"]) == 0
    cap = capsys.readouterr()
    runs = [json.loads(x) for x in cap.out.splitlines()]
    assert [(r["workload"], r["settings"]) for r in runs] == \
        [("queue", {"enable.idempotence": "true"})] * 4 + [("pid", {"enable.idempotence": "true"})] * 2
    assert cap.err.count("left out (refused)") == 2
    assert sorted(os.path.basename(os.path.dirname(r["out"])) for r in runs[:4]) == [
        "client=confluent-kafka,enable.idempotence=true,kafka.version=3.6",
        "client=confluent-kafka,enable.idempotence=true,kafka.version=4.0",
        "client=eoslab,enable.idempotence=true,kafka.version=3.6",
        "client=eoslab,enable.idempotence=true,kafka.version=4.0"]


def test_store_reads_the_client_and_its_version_and_older_runs_are_eoslab(tmp_path):
    from pipeline.store import find_runs
    runs = {r.run: r for r in find_runs(two_client_store(str(tmp_path)))}
    assert {rid: (r.client, r.client_version) for rid, r in runs.items()} == {
        "queue/kill/old/seed-1": ("eoslab", ""),
        "queue/kill/eoslab/seed-2": ("eoslab", "0.9.0"),
        "queue/kill/confluent-kafka/seed-1": ("confluent-kafka", "2.6.0 (librdkafka 2.6.1)"),
        "queue/kill/confluent-kafka/seed-2": ("confluent-kafka", "2.6.0 (librdkafka 2.6.1)")}
    assert {r.config for r in runs.values()} == {"acks=all"}              # the client is no setting
    assert runs["queue/kill/old/seed-1"].row()["client"] == "eoslab"


def _analyzed_without_spark(store: str, out: str) -> tuple[list[dict], list[str], list[dict]]:
    """What the Spark job does with the store, task by task on this process: the rows the check
    stage returns (pipeline.job's metadata through pipeline.executors) and the matrix of them."""
    from pipeline import matrix
    from pipeline.executors import analyze_run
    from pipeline.job import _meta
    from pipeline.store import find_runs
    run_rows = []
    for r in find_runs(store):
        row = analyze_run(_meta(r, out, False), os.path.join(out, "ops"))
        assert row["problem"] is None, row["problem"]
        row.pop("result")
        run_rows.append(row)
    rows, columns = matrix.aggregate(run_rows)
    return rows, columns, run_rows


def test_the_matrix_keeps_two_clients_runs_of_one_cell_apart(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from pipeline import matrix
    rows, columns, _ = _analyzed_without_spark(two_client_store(str(tmp_path / "store")), str(tmp_path / "out"))
    assert columns[3:6] == ["kafka_version", "client", "client_version"]
    anyrow = {r["client"]: r for r in rows if r["anomaly"] == "(any)"}
    assert {c: (r["runs"], r["runs_with"], r["client_version"], r["config"], r["kafka_version"])
            for c, r in anyrow.items()} == {"confluent-kafka": (2, 1, "2.6.0 (librdkafka 2.6.1)", "acks=all", "3.6"),
                                            "eoslab": (2, 0, "0.9.0", "acks=all", "3.6")}
    dup = {r["client"]: (r["runs_with"], r["count"]) for r in rows if r["anomaly"] == "duplicate"}
    assert dup == {"confluent-kafka": (1, 1), "eoslab": (0, 0)}
    assert len({matrix.cell_key(r) for r in rows}) == 2
    matrix.write(rows, columns, str(tmp_path / "m.parquet"), str(tmp_path / "m.csv"))
    back = pq.read_table(str(tmp_path / "m.parquet")).to_pylist()
    assert {(r["client"], r["client_version"]) for r in back} == {("confluent-kafka", "2.6.0 (librdkafka 2.6.1)"),
                                                                 ("eoslab", "0.9.0")}
    head = (tmp_path / "m.csv").read_text().splitlines()[0]
    assert '"kafka_version","client","client_version","kind"' in head


def _page(rows, run_rows) -> str:
    from pipeline.html import render
    for r in run_rows:
        r.setdefault("report", None)
    return render(rows, run_rows, {"runs": len(run_rows), "ops": 1, "cells": 2, "invalid_runs": 1,
                                   "master": "local[1]", "cores": 1, "seconds": 1.0}, "/s", "/o")


def test_the_page_groups_by_client_and_the_run_table_names_it(tmp_path):
    rows, _, run_rows = _analyzed_without_spark(two_client_store(str(tmp_path / "store")), str(tmp_path / "out"))
    page = _page(rows, run_rows)
    for c in ("confluent-kafka", "eoslab"):
        assert f"<h2>queue, client {c}: invalid runs by configuration × faults</h2>" in page
        assert f"<h2>queue, client {c} under kill: anomalies by configuration</h2>" in page
    assert "<h2>queue, acks=all: invalid runs by client and Kafka version × faults</h2>" in page
    assert ">confluent-kafka, Kafka 3.6</text>" in page and ">eoslab, Kafka 3.6</text>" in page
    assert "confluent-kafka, Kafka 3.6 | kill: 1 of 2 runs" in page
    cells = page.replace("<td class=num>", "<td>")
    assert cells.count("<td>confluent-kafka 2.6.0 (librdkafka 2.6.1)</td>") == 1 + 2      # cell table, runs
    assert cells.count("<td>eoslab 0.9.0</td>") == 1 + 1 and cells.count("<td>eoslab</td>") == 1
    assert "<th>Kafka</th><th>client</th>" in page


def test_the_heading_names_client_and_release_when_both_vary(tmp_path):
    store = two_client_store(str(tmp_path / "store"))
    meta_path = os.path.join(store, "queue/kill/eoslab/seed-2/run.json")
    with open(meta_path) as fh:
        meta = json.load(fh)
    with open(meta_path, "w") as fh:
        json.dump({**meta, "kafka_version": "4.0"}, fh)
    rows, _, run_rows = _analyzed_without_spark(store, str(tmp_path / "out"))
    page = _page(rows, run_rows)
    assert [h for h in ("queue, client confluent-kafka, Kafka 3.6", "queue, client eoslab, Kafka 3.6",
                        "queue, client eoslab, Kafka 4.0") if f"<h2>{h}: invalid runs" in page] == \
        ["queue, client confluent-kafka, Kafka 3.6", "queue, client eoslab, Kafka 3.6",
         "queue, client eoslab, Kafka 4.0"]
    assert ">eoslab, Kafka 4.0</text>" in page


def test_the_documented_clients_matrix_plans_as_documented(tmp_path, capsys, monkeypatch):
    """docs/analysis.md's clients.json and its command: the runs the page states, by client and release."""
    import re
    import shlex
    from pathlib import Path

    from eoslab.cli import main
    doc = (Path(__file__).resolve().parents[2] / "docs" / "analysis.md").read_text()
    part = doc[doc.index("### Clients and releases as dimensions"):]
    (tmp_path / "clients.json").write_text(re.search(r"```json\n(.*?)```", part, re.S).group(1))
    command = re.search(r"```sh\n(.*?)\n.venv/bin/eoslab analyze", part, re.S).group(1).replace("\\\n", " ")
    argv = shlex.split(command)[1:]
    monkeypatch.chdir(tmp_path)                             # clients.json and the store as the page names them
    rc = main(argv + ["--dry-run"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    cells = {os.path.basename(os.path.dirname(json.loads(x)["out"])) for x in cap.out.splitlines()}
    stated = re.search(r"That is (\d+) cells × 3 fault packages × 5 seeds = (\d+) runs", part)
    assert len(cap.out.splitlines()) == int(stated.group(2)) == int(stated.group(1)) * 3 * 5
    assert len(cells) == int(stated.group(1)) and all("client=" in c and "kafka.version=" in c for c in cells)
    assert all(json.loads(x)["settings"] == {"enable.idempotence": "true"} for x in cap.out.splitlines())
