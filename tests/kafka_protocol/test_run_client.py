"""`eoslab run --client`: the queue and txn workloads driven by a real Kafka client (the copier's:
test_real_copier.py)."""
import json
import os

import pytest

from cluster.run import RunConfig, run


def _cfg(tmp_path, **kw):
    base = dict(workload="queue", nemesis=["none"], time_limit=8, seed=3, out=str(tmp_path / "run"))
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.fast
@pytest.mark.parametrize("kw, message", [
    ({"client": "sarama"}, "unknown client 'sarama'"),
    ({"client": "confluent-kafka", "workload": "zombie"}, "the zombie workload drives eoslab, not confluent-kafka"),
    ({"client": "aiokafka", "workload": "pid"}, "the pid workload drives eoslab, not aiokafka"),
    ({"client": "confluent-kafka", "settings": {"no.such.setting": "1"}}, "confluent-kafka: "),
    ({"client": "kafka-python", "settings": {"no.such.setting": "1"}}, "kafka-python has no producer setting"),
    ({"client": "aiokafka", "settings": {"no.such.setting": "1"}}, "aiokafka has no producer setting"),
])
def test_bad_client_choices_are_refused_before_anything_starts(tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        _cfg(tmp_path, **kw).validate()
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.integration
def test_a_queue_run_with_librdkafka_under_kill_leader_and_lost_acks_is_valid_and_says_which_client(
        tmp_path, eoslab_home, monkeypatch):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    cfg = _cfg(tmp_path, client="confluent-kafka", nemesis=["kill-leader", "lost-ack"], time_limit=15,
               settings={"enable.idempotence": "true", "acks": "all"})
    assert run(cfg) == 0
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert meta["client"] == "confluent-kafka"
    assert meta["versions"]["librdkafka"].startswith("2.")
    hist = [json.loads(line) for line in open(tmp_path / "run" / "history.jsonl")]
    sends = [o for o in hist if o["f"] == "send" and o["type"] == "ok" and o["process"] != "nemesis"]
    assert len(sends) > 50
    assert any(o["f"] == "start-lost-ack" for o in hist) and any(o["f"] == "start-kill-leader" for o in hist)


@pytest.mark.integration
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_a_txn_run_under_kill_leader_is_valid(tmp_path, eoslab_home, monkeypatch, client):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    cfg = _cfg(tmp_path, workload="txn", client=client, nemesis=["kill-leader"], time_limit=15)
    assert run(cfg) == 0
    hist = [json.loads(line) for line in open(tmp_path / "run" / "history.jsonl")]
    done = [o for o in hist if o["f"] == "txn" and o["type"] != "invoke"]
    assert sum(o["type"] == "ok" for o in done) > 10
    assert any(o.get("error") == "aborted-by-client" for o in done)
    assert any(o["f"] == "poll" and o["type"] == "ok" and o["value"][0][1] for o in hist)
    # the offsets monitor sampled the partitions through the run; KIP-664's gauges recorded at the end
    samples = [o for o in hist if o["process"] == "monitor" and o["f"] == "offsets"]
    assert len(samples) > 10 and all(lso <= hw for o in samples for _, lso, hw in o["value"])
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert meta["hang_threshold_s"] == 25.0
    assert set(meta["transaction_metrics"]) == {"broker-1", "broker-2", "broker-3"}
    assert all(m["PartitionsWithLateTransactionsCount"] == 0 for m in meta["transaction_metrics"].values())


@pytest.mark.integration
def test_a_queue_run_with_kafka_python_under_kill_leader_and_lost_acks_is_valid(tmp_path, eoslab_home, monkeypatch):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    cfg = _cfg(tmp_path, client="kafka-python", nemesis=["kill-leader", "lost-ack"], time_limit=15,
               settings={"enable.idempotence": "true", "acks": "all"})
    assert run(cfg) == 0
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert meta["client"] == "kafka-python" and meta["versions"]["kafka-python"]
    hist = [json.loads(line) for line in open(tmp_path / "run" / "history.jsonl")]
    assert sum(o["f"] == "send" and o["type"] == "ok" for o in hist) > 50


@pytest.mark.integration
def test_a_queue_run_with_aiokafka_under_kill_leader_and_lost_acks_is_valid(tmp_path, eoslab_home, monkeypatch):
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    cfg = _cfg(tmp_path, client="aiokafka", nemesis=["kill-leader", "lost-ack"], time_limit=15,
               settings={"enable.idempotence": "true", "acks": "all"})
    assert run(cfg) == 0
    meta = json.load(open(tmp_path / "run" / "run.json"))
    assert meta["client"] == "aiokafka" and meta["versions"]["aiokafka"]
    hist = [json.loads(line) for line in open(tmp_path / "run" / "history.jsonl")]
    assert sum(o["f"] == "send" and o["type"] == "ok" for o in hist) > 50
