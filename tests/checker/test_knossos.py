"""The knossos corpus (tests/data/knossos, copied from jepsen-io/knossos): every verdict right.

good/ histories must be valid and bad/ ones invalid, with the failing ops
knossos names; cas-register starts at 0 and multi-register at {x: 0, y: 0}.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from checker.formats import open_history
from checker.history import read_jsonl, write_jsonl
from checker.linear import check_linearizable

pytestmark = pytest.mark.fast

CORPUS = Path(__file__).resolve().parent.parent / "data" / "knossos"
FILES = sorted(CORPUS.glob("*/*/*.edn"))


def setup_of(path: Path) -> tuple[str, object]:
    if path.parts[-3] == "multi-register":
        return "multi-register", {"x": 0, "y": 0}
    return "cas-register", 0


def test_corpus_is_present():
    assert len(FILES) == 71
    assert {p.parts[-3] for p in FILES} == {"cas-register", "multi-register"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_verdict(path):
    model, initial = setup_of(path)
    r = check_linearizable(open_history(path), model, initial, time_limit=30)
    expected = path.parts[-2] == "good"
    assert r["valid"] is expected, r["stats"]
    assert ("nonlinearizable" in r["anomalies"]) is (not expected)


@pytest.mark.parametrize("name, op", [
    ("cas-failure.edn", {"process": 70, "type": "ok", "f": "read", "value": 0, "index": 491}),
    ("immediate-failure.edn", {"process": 1, "type": "ok", "f": "read", "value": 3, "index": 3}),
])
def test_corpus_failing_op_is_the_one_knossos_names(name, op):
    r = check_linearizable(open_history(CORPUS / "cas-register" / "bad" / name), "cas-register", 0)
    got = r["anomalies"]["nonlinearizable"]["op"]
    assert {k: got[k] for k in op} == op


def test_witness_prefix_and_states_for_cas_failure():
    r = check_linearizable(open_history(CORPUS / "cas-register" / "bad" / "cas-failure.edn"),
                           "cas-register", 0)
    w = r["anomalies"]["nonlinearizable"]
    assert w["prefix"] and all(isinstance(i, int) and i < 491 for i in w["prefix"])
    assert w["states"] and 0 not in w["states"]


@pytest.mark.parametrize("name", ["memstress3-12.edn", "memstress3-14.edn"])
def test_memstress_is_unknown_under_a_1ms_limit(name):
    r = check_linearizable(open_history(CORPUS / "cas-register" / "good" / name), "cas-register", 0,
                           time_limit=0.001)
    assert r["valid"] == "unknown"


@pytest.mark.parametrize("name", ["memstress3-12.edn", "memstress3-14.edn"])
def test_memstress_is_valid_without_a_limit(name):
    ops = list(open_history(CORPUS / "cas-register" / "good" / name))
    assert check_linearizable(ops, "cas-register", 0)["valid"] is True


@pytest.mark.parametrize("rel", ["cas-register/bad/cas-failure.edn", "cas-register/good/memstress3-12.edn"])
def test_verdict_survives_conversion_to_jsonl(rel):
    ops = list(open_history(CORPUS / rel))
    buf = io.StringIO()
    write_jsonl(ops, buf)
    buf.seek(0)
    again = list(read_jsonl(buf))
    assert json.loads(buf.getvalue().splitlines()[0])["process"] == ops[0].process
    assert check_linearizable(again, "cas-register", 0)["valid"] == \
        check_linearizable(ops, "cas-register", 0)["valid"]
