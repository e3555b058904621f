"""bench/fuzz.py's hostile requests: the client APIs that may destroy records (deleting a topic, altering its
retention) never name the topic whose records the fuzz reads back afterwards; the others still aim at it."""
from __future__ import annotations

import random

import pytest

from eoslab.v1 import controller_pb2
from tests.helpers import script_module

pytestmark = pytest.mark.fast


def _method(name: str):
    return controller_pb2.DESCRIPTOR.services_by_name["Controller"].methods_by_name[name]


def _names_durable(fuzz, name: str, seeds: int = 400) -> int:
    m = _method(name)
    return sum(fuzz.DURABLE.encode() in fuzz.hostile_request(m, random.Random(s)).SerializeToString()
               for s in range(seeds))


def test_destructive_requests_never_name_the_durable_topic():
    fuzz = script_module("bench", "fuzz.py")
    for name in ("DeleteTopics", "AlterTopicConfigs"):
        assert name in fuzz.DESTRUCTIVE
        assert _names_durable(fuzz, name) == 0, name


def test_other_requests_still_name_the_durable_topic():
    fuzz = script_module("bench", "fuzz.py")
    assert _names_durable(fuzz, "CreatePartitions") > 20


def test_every_destructive_name_is_a_method_the_fuzz_calls():
    fuzz = script_module("bench", "fuzz.py")
    called = {m.name for _, s in fuzz.SERVICES for m in s.methods}
    assert fuzz.DESTRUCTIVE <= called


def test_a_failed_fuzz_keeps_the_services_logs_under_eoslab_home(tmp_path, monkeypatch, capsys):
    fuzz = script_module("bench", "fuzz.py")
    cluster = tmp_path / "cluster"
    (cluster / "logs").mkdir(parents=True)
    (cluster / "logs" / "broker-1.log").write_text("broker-1 INFO deleted topic fuzz-durable\n")
    monkeypatch.setenv("EOSLAB_HOME", str(tmp_path / "home"))
    fuzz.keep_logs(type("Runtime", (), {"dir": str(cluster)})())
    kept = list((tmp_path / "home").glob("fuzz-failed-*/broker-1.log"))
    assert len(kept) == 1 and "deleted topic" in kept[0].read_text()
    assert str(kept[0].parent) in capsys.readouterr().out
