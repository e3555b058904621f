"""`eoslab serve`: a hand-made store (every verdict, broken runs, a shrunk run, a matrix page) read
into rows, and the server as a real process on port 0: the page, /api/runs, files confined to the
store, a run added while serving, SIGTERM. What each row must say comes from the store written
here, not from the scanner."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from unittest.mock import ANY
from urllib.parse import quote

import pytest

from pipeline.serve import confine
from tests.helpers import wait_for
from pipeline.serve_scan import NotAStore, Scanner, check_store

SECRET = "the-secret-beside-the-store"
CLI = [sys.executable, "-c", "import sys; from eoslab.cli import main; sys.exit(main())"]

VALID = "queue/kill-leader/acks=1/seed-1"
DUP = "queue/kill-leader/acks=1/seed-2"
SHRUNK = "queue/kill-leader/acks=1/seed-2-shrunk"               # beside its original
NESTED = "queue/kill-leader/acks=1/seed-2/shrunk"                # inside its original's folder
LAB = "txn/lost-ack/defaults/seed-5"
OLD = "txn/lost-ack/defaults/seed-6"
BAD_JSON = "broken/bad-run-json"
NO_HISTORY = "broken/no-history"
BAD_RESULTS = "broken/results-not-a-result"
PENDING = "queue/pause/defaults/seed-9"
MARKUP = "broken/<img src=x onerror=alert(1)>{{CONFIG}}"           # a folder name that is markup
SCENARIO = "scenarios/lost-ack-6-in-flight-epoch-bump"           # `eoslab scenario run --out`: no run.json
# id -> (verdict, anomaly types, seed)
EXPECTED = {
    VALID: ("valid", [], 1), DUP: ("anomalies", ["duplicate", "lost-write"], 2),
    SHRUNK: ("anomalies", ["duplicate"], 2), NESTED: ("anomalies", ["duplicate"], 2), LAB: ("lab-error", [], 5),
    OLD: ("anomalies", ["g1a"], 6),
    BAD_JSON: ("broken", [], None), MARKUP: ("broken", [], None), NO_HISTORY: ("broken", [], 3),
    BAD_RESULTS: ("broken", [], 4),
    PENDING: ("pending", [], 9), SCENARIO: ("anomalies", ["duplicate"], None),
}


def _meta(workload="queue", nemesis=("kill-leader",), seed=1, client="eoslab", kafka="4.0", **extra):
    return {"workload": workload, "nemesis": list(nemesis), "seed": seed, "client": client,
            "kafka_version": kafka, "settings": extra.pop("settings", {}), "time_limit": 30.0,
            "concurrency": 4, "partitions": 3, "ops": 1000, "started": f"2026-11-25T10:00:0{seed % 10}Z",
            "schedule": [{"at": 1.0 + i, "package": nemesis[0], "duration": 1.0} for i in range(5)],
            "versions": {"eoslab": "0.1.0", "python": "3.11.7"}, "lab_errors": [], **extra}


def write_run(store, rid, meta=None, results=None, history=True, report=True, raw_meta=None):
    d = os.path.join(store, rid)
    os.makedirs(d, exist_ok=True)
    if raw_meta is not None:
        with open(os.path.join(d, "run.json"), "w") as fh:
            fh.write(raw_meta)
    elif meta is not None:
        with open(os.path.join(d, "run.json"), "w") as fh:
            json.dump(meta, fh)
    if results is not None:
        with open(os.path.join(d, "results.json"), "w") as fh:
            fh.write(results if isinstance(results, str) else json.dumps(results))
    if history:
        with open(os.path.join(d, "history.jsonl"), "w") as fh:
            fh.write('{"index": 0, "type": "invoke", "f": "send", "process": 0, "time": 0}\n')
    if report:
        with open(os.path.join(d, "report.html"), "w") as fh:
            fh.write(f"<html><body><h1>report of {rid}</h1></body></html>\n")
    return d


def build_store(root) -> str:
    """The hand-made store under root/store, and root/secret.txt beside it (outside the store)."""
    root = str(root)
    store = os.path.join(root, "store")
    with open(os.path.join(root, "secret.txt"), "w") as fh:
        fh.write(SECRET)
    write_run(store, VALID, _meta(settings={"acks": "1"}),
              {"verdict": "valid", "valid": True, "anomalies": {}, "stats": {"anomaly_counts": {}}})
    write_run(store, DUP, _meta(seed=2, client="confluent-kafka", settings={"acks": "1"},
                                versions={"confluent-kafka": "2.6.0", "librdkafka": "2.6.0"}),
              {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}, {}], "lost-write": [{}]},
               "stats": {"anomaly_counts": {"duplicate": 7, "lost-write": 1}}})
    shrunk = _meta(seed=2, client="confluent-kafka", settings={"acks": "1"}, shrunk_from="../seed-2")
    shrunk.update(schedule=shrunk["schedule"][:2], time_limit=8.0, concurrency=2)
    write_run(store, SHRUNK, shrunk, {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}]}})
    write_run(store, NESTED, {**shrunk, "shrunk_from": ".."},
              {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}]}})
    write_run(store, LAB, _meta("txn", ("lost-ack",), 5, kafka="3.6"),
              {"verdict": "lab-error", "valid": "unknown", "anomalies": {}, "unconfirmed": {"g0": [{}]},
               "lab_errors": [{"kind": "node-down", "message": "broker-2 did not come back"}],
               "stats": {"reason": "lab error (1: node-down): the lab itself failed"}}, report=False)
    old = _meta("txn", ("lost-ack",), 6, kafka="3.0")
    for k in ("client", "kafka_version"):
        del old[k]
    write_run(store, OLD, old, {"valid": False, "anomalies": {"g1a": [{}, {}, {}]}})   # before "verdict"
    write_run(store, BAD_JSON, raw_meta='{"workload": "queue", ', results={"verdict": "valid", "valid": True})
    write_run(store, NO_HISTORY, _meta(seed=3), {"verdict": "valid", "valid": True}, history=False)
    write_run(store, BAD_RESULTS, _meta(seed=4), results='["not", "a", "result"]')
    write_run(store, PENDING, _meta(nemesis=("pause",), seed=9), report=False)
    write_run(store, MARKUP, report=False)                         # a history alone: broken, no run.json
    write_run(store, SCENARIO, None, {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}]},
                                      "scenario": {"name": "lost-ack-6-in-flight-epoch-bump", "match": True,
                                                   "expected": ["duplicate"], "observed": ["duplicate"],
                                                   "cluster": "1 broker, 1 controller", "kafka_version": "4.0"}})
    m = os.path.join(store, "matrix")
    os.makedirs(os.path.join(m, "reports", LAB))
    for name, text in (("index.html", "<html><body>the matrix page</body></html>"), ("matrix.csv", "a,b\n"),
                       (os.path.join("reports", LAB, "report.html"), "<html>analyze's report of the lab run")):
        with open(os.path.join(m, name), "w") as fh:
            fh.write(text)
    os.makedirs(os.path.join(store, ".hidden", "x"))
    with open(os.path.join(store, ".hidden", "x", "run.json"), "w") as fh:
        fh.write("{}")
    os.symlink(root, os.path.join(store, "link-out"))          # a symlink that leads out of the store
    return store


@pytest.fixture
def store(tmp_path):
    return build_store(tmp_path)


def _rows(store):
    return {r["id"]: r for r in Scanner(store).scan()["runs"]}


@pytest.mark.fast
def test_scan_reads_every_run_as_written(store):
    data = Scanner(store).scan()
    rows = {r["id"]: r for r in data["runs"]}
    assert sorted(rows) == sorted(EXPECTED)
    for rid, (verdict, anomalies, seed) in EXPECTED.items():
        r = rows[rid]
        assert (r["verdict"], [a["type"] for a in r["anomalies"]], r["seed"]) == (verdict, anomalies, seed), rid
    assert data["counts"] == {"valid": 1, "anomalies": 5, "lab-error": 1, "broken": 4, "pending": 1}
    dup = rows[DUP]
    assert dup["anomalies"] == [{"type": "duplicate", "count": 7}, {"type": "lost-write", "count": 1}]
    assert (dup["workload"], dup["client"], dup["client_version"], dup["kafka"], dup["faults"], dup["config"]) == \
        ("queue", "confluent-kafka", "2.6.0 (librdkafka 2.6.0)", "4.0", "kill-leader", "acks=1")
    assert dup["report"] == "/store/queue/kill-leader/acks%3D1/seed-2/report.html"
    assert rows[VALID]["client_version"] == "0.1.0" and rows[VALID]["problems"] == []
    lab = rows[LAB]
    assert (lab["kafka"], lab["unconfirmed"], lab["why"]) == \
        ("3.6", [{"type": "g0", "count": 1}], "node-down: broker-2 did not come back")
    assert lab["report"] == f"/store/matrix/reports/{LAB}/report.html"        # analyze's report, for want of its own
    old = rows[OLD]
    assert (old["client"], old["kafka"], old["anomalies"]) == ("eoslab", "unknown", [{"type": "g1a", "count": 3}])
    assert "run.json has no kafka_version, client (an older or synthetic run)" in old["notes"]
    assert any("no verdict field" in n for n in old["notes"])
    assert data["matrix"] == [{"dir": "matrix", "href": "/store/matrix/index.html"}]
    sc = rows[SCENARIO]
    assert (sc["workload"], sc["faults"], sc["kafka"], sc["config"], sc["problems"]) == \
        ("scenario", "lost-ack-6-in-flight-epoch-bump", "4.0", "1 broker, 1 controller", [])
    assert "scenario lost-ack-6-in-flight-epoch-bump: expected ['duplicate'], observed ['duplicate']: as expected" \
        in sc["notes"]


@pytest.mark.fast
def test_broken_runs_say_why(store):
    rows = _rows(store)
    assert rows[BAD_JSON]["problems"][0].startswith("run.json: not valid JSON")
    assert rows[BAD_JSON]["run_json"] == f"/store/{BAD_JSON}/run.json"
    assert rows[NO_HISTORY]["problems"] == ["no history.jsonl"]
    assert rows[BAD_RESULTS]["problems"] == ["results.json: no verdict and no valid field (not a checker result)"]
    assert rows[PENDING]["problems"] == [] and "no results.json yet" in rows[PENDING]["notes"][0]
    os.remove(os.path.join(store, VALID, "run.json"))
    assert _rows(store)[VALID]["problems"] == ["no run.json"]


@pytest.mark.fast
def test_shrunk_run_names_its_original_and_the_original_lists_it(store):
    rows = _rows(store)
    assert rows[SHRUNK]["shrunk_from"] == rows[NESTED]["shrunk_from"] == DUP
    assert rows[DUP]["shrunk"] == [NESTED, SHRUNK]
    assert (rows[SHRUNK]["scheduled_faults"], rows[DUP]["scheduled_faults"]) == (2, 5)
    assert (rows[SHRUNK]["time_limit"], rows[SHRUNK]["concurrency"]) == (8.0, 2)
    path = os.path.join(store, SHRUNK, "run.json")
    with open(path) as fh:
        meta = json.load(fh)
    meta["shrunk_from"] = "../seed-404"
    with open(path, "w") as fh:
        json.dump(meta, fh)
    rows = _rows(store)
    assert rows[SHRUNK]["shrunk_from"] is None and rows[DUP]["shrunk"] == [NESTED]
    assert rows[SHRUNK]["shrunk_from_missing"] == "shrunk_from '../seed-404' is not a run of this store"


@pytest.mark.fast
def test_a_rescan_sees_a_new_and_a_rewritten_file(store):
    sc = Scanner(store)
    assert {r["id"]: r for r in sc.scan()["runs"]}[PENDING]["verdict"] == "pending"
    g = sc.scan()["generation"]
    for rid in (PENDING, VALID):                 # a results.json written, and one written again
        with open(os.path.join(store, rid, "results.json"), "w") as fh:
            json.dump({"verdict": "invalid", "valid": False, "anomalies": {"lost-write": [{}, {}]}}, fh)
    data = sc.scan()
    rows = {r["id"]: r for r in data["runs"]}
    assert rows[PENDING]["verdict"] == rows[VALID]["verdict"] == "anomalies" and data["generation"] != g


@pytest.mark.fast
def test_check_store(tmp_path):
    (tmp_path / "empty").mkdir()
    assert check_store(str(tmp_path / "empty")) == os.path.realpath(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    (tmp_path / "docs" / "a").mkdir(parents=True)
    (tmp_path / "docs" / "a" / "notes.txt").write_text("x")
    for name, msg in (("missing", "no such directory"), ("file", "not a directory"), ("docs", "not a store")):
        with pytest.raises(NotAStore, match=msg):
            check_store(str(tmp_path / name))


@pytest.mark.fast
@pytest.mark.parametrize("rel", ["../secret.txt", "a/../../secret.txt", "link-out/secret.txt",
                                 "/etc/passwd", "..", "x\x00y"])
def test_confine_refuses_paths_out_of_the_store(store, rel):
    assert confine(os.path.realpath(store), rel) is None


@pytest.mark.fast
def test_confine_keeps_paths_in_the_store(store):
    real = os.path.realpath(store)
    assert confine(real, f"{DUP}/report.html") == os.path.join(real, DUP, "report.html")
    assert confine(real, f"{DUP}/../seed-1/run.json") == os.path.join(real, VALID, "run.json")


@pytest.mark.fast
def test_not_a_store_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    import pipeline.serve
    from eoslab.cli import main

    def bind(*a):
        raise AssertionError("it went on to listen")
    monkeypatch.setattr(pipeline.serve, "bind", bind)
    (tmp_path / "d" / "e").mkdir(parents=True)
    for path, why in ((tmp_path / "missing", "no such directory"), (tmp_path / "d", "not a store: no run folder")):
        assert main(["serve", str(path), "--port", "0"]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.startswith(f"eoslab: {path}: {why}") and cap.err.count("\n") == 1


# -- the server as a real process ------------------------------------------------------------------

class Server:
    def __init__(self, store, *args):
        self.proc = subprocess.Popen([*CLI, "serve", store, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = _readline(self.proc, 60)
        assert line.startswith("eoslab serve: http://127.0.0.1:"), (line, self.proc.stderr.read())
        self.url, self.store = line.split()[2], store
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def get(self, path):
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()

    def raw(self, path):
        """GET with the path sent as given (no client-side normalisation)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
        conn.close()
        return resp.status, body

    def runs(self):
        return {r["id"]: r for r in json.loads(self.get("/api/runs")[2])["runs"]}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def _readline(proc, timeout):
    got = []
    t = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else ""


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server over a store no test of this module changes."""
    s = Server(build_store(tmp_path_factory.mktemp("serve")), "--refresh", "0.5")
    yield s
    s.stop()


@pytest.fixture
def server(store):
    s = Server(store, "--refresh", "0.5")
    yield s
    s.stop()


def test_page_and_api(shared):
    server = shared
    status, ctype, body = server.get("/")
    assert status == 200 and ctype.startswith("text/html")
    assert '<script src="/static/serve.js"></script>' in body and "http://" not in body.replace(server.url, "")
    assert "<img" not in body                      # the folder named as markup went in as data (and its
                                                   # "{{CONFIG}}" stayed its own: the ids below are exact)
    embedded = body.split('<script type="application/json" id="data">')[1].split("</script>")[0]
    assert sorted(r["id"] for r in json.loads(embedded)["runs"]) == sorted(EXPECTED)
    runs = server.runs()
    assert {k: r["verdict"] for k, r in runs.items()} == {k: v[0] for k, v in EXPECTED.items()}
    gen = json.loads(server.get("/api/runs")[2])["generation"]
    assert json.loads(server.get(f"/api/runs?since={gen}")[2]) == {"generation": gen, "unchanged": True,
                                                                    "scanned": ANY}
    assert len(json.loads(server.get("/api/runs?since=0000")[2])["runs"]) == len(EXPECTED)
    for asset, kind in (("serve.js", "javascript"), ("serve.css", "text/css")):
        status, ctype, text = server.get(f"/static/{asset}")
        assert status == 200 and kind in ctype
        assert not re.search(r"https?:|url\(|@import|//[a-z0-9.-]+\.[a-z]{2,}/", text), asset   # no other host
    status, _, text = server.get(runs[DUP]["report"])
    assert status == 200 and f"report of {DUP}" in text
    assert "the matrix page" in server.get("/store/matrix/index.html")[2]
    assert server.get(f"/store/{VALID}/history.jsonl")[1].startswith("text/plain")


@pytest.mark.parametrize("path", ["/store/../secret.txt", "/store/%2e%2e/secret.txt", "/store/..%2fsecret.txt",
                                  "/store/link-out/secret.txt", "/store/%2F{abs_secret}",
                                  "/store/queue/..%2f..%2fsecret.txt", "/static/..%2f..%2f..%2fpyproject.toml",
                                  "/static/serve.html"])
def test_paths_out_of_the_store_are_refused(shared, path):
    secret = os.path.join(os.path.dirname(shared.store), "secret.txt")
    status, body = shared.raw(path.format(abs_secret=quote(secret.lstrip("/"), safe="")))
    assert status in (403, 404), (status, body[:200])
    assert SECRET not in body and "[project]" not in body and "{{DATA}}" not in body


def test_a_run_added_while_serving_appears(server, store):
    assert "queue/kill/new/seed-1" not in server.runs()
    write_run(store, "queue/kill/new/seed-1", _meta(nemesis=("kill",), seed=11),
              {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}]}})
    row = wait_for(lambda: server.runs().get("queue/kill/new/seed-1"), what="the new run in /api/runs")
    assert row["verdict"] == "anomalies" and "queue/kill/new/seed-1" in server.get("/")[2]


def test_sigterm_stops_it_cleanly(store):
    s = Server(store)
    assert s.get("/api/runs")[0] == 200
    assert s.stop() == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()


def test_a_port_in_use_is_one_line(store):
    s = Server(store)
    try:
        r = subprocess.run([*CLI, "serve", store, "--port", str(s.port)], capture_output=True, text=True,
                           timeout=60, check=False)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip().splitlines() == [f"eoslab: cannot listen on 127.0.0.1:{s.port}: Address already in use"]
    finally:
        s.stop()
