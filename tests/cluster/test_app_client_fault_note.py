"""`eoslab app run` names the application's own client fault (KIP-447): a real app run against a real local
cluster whose one instance holds its group's offsets in an open confluent-kafka transaction
(send_offsets_to_transaction) and meanwhile reads the group's committed offsets, with aiokafka (no
require_stable: the brokers count it, and results.json and report.html carry the note) or with
confluent-kafka at read_committed (require_stable: no note). The app copies nothing, so the verdict is the
checker's invalid either way: the note never changes it."""
import json
import os
import sys
import uuid

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("confluent_kafka")
pytest.importorskip("aiokafka")

APP = r'''
import asyncio, os, sys, time
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
env = os.environ
boot, group, topic = env["EOSLAB_BOOTSTRAP"], env["EOSLAB_GROUP_ID"], env["EOSLAB_INPUT_TOPIC"]
meta = Consumer({"bootstrap.servers": boot, "group.id": group})
p = Producer({"bootstrap.servers": boot, "transactional.id": env["EOSLAB_TRANSACTIONAL_ID"]})
p.init_transactions(30)
print("transactions initialised", flush=True)
p.begin_transaction()
p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], meta.consumer_group_metadata(), 30)
if sys.argv[1] == "aiokafka":
    import aiokafka
    async def fetch():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=boot.split(","), group_id=group, enable_auto_commit=False)
        await c.start()
        try:
            return await c.committed(aiokafka.TopicPartition(topic, 0))
        finally:
            await c.stop()
    got = asyncio.run(fetch())
else:
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, 0)], 3)[0].offset
    except KafkaException as e:
        got = f"retried: {e}"
    c.close()
p.abort_transaction(30)
print(f"fetched while pending: {got}", flush=True)
time.sleep(600)
'''


# The run lasts RUN_S whatever the app does. Unloaded, the app reaches its fetch within 0.4 s of starting; on a
# loaded CI machine one run printed nothing in 15 s, so the run leaves it the app's own 30 s bound on its
# init_transactions plus its start-up.
RUN_S = 40


@pytest.fixture(scope="module")
def app_cluster(eoslab_home):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-acf-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1,
                      txn_coordinators=2)
    rt.up()
    yield rt
    rt.down()


@pytest.mark.parametrize("client", ["aiokafka", "confluent-kafka"])
def test_the_report_names_a_consumer_that_fetched_offsets_without_require_stable(tmp_path, monkeypatch,
                                                                                eoslab_home, app_cluster, client):
    from cluster.apps.run import AppRunConfig, app_run
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    script = tmp_path / "app.py"
    script.write_text(APP)
    out = str(tmp_path / "run")
    code = app_run(AppRunConfig(cmd=f"{sys.executable} {script} {client}", out=out, cluster=app_cluster.cluster_name,
                                instances=1, records=10, time_limit=RUN_S, first_output_s=60, quiet_s=1))
    log = open(os.path.join(out, "instances", "0.0.log")).read()
    assert "fetched while pending:" in log                         # the app got to its fetch within the run
    meta = json.load(open(os.path.join(out, "run.json")))
    results = json.load(open(os.path.join(out, "results.json")))
    page = open(os.path.join(out, "report.html")).read()
    assert code == 1 and results["verdict"] == "invalid"          # it copied nothing: the checker's verdict
    assert results["stats"]["anomaly_counts"]["lost-write"] == 10 or results["stats"]["anomaly_counts"].get(
        "unprocessed") == 10
    reading = meta["unstable_offset_fetches"]
    assert not reading["unread"] and len(reading["brokers"]) == 3
    if client == "aiokafka":
        assert "fetched while pending: None" in log                # the stale answer
        assert reading["count"] >= 1 and reading["client_ids"][0].startswith("aiokafka-")
        [note] = results["client_faults"]
        assert note["count"] == reading["count"] and meta["client_faults"] == results["client_faults"]
        assert "without require_stable" in note["note"] and "aiokafka does not support require_stable" in note["note"]
        assert "<h2>The application's client</h2>" in page
        assert "aiokafka does not support require_stable" in page
    else:
        assert "fetched while pending: retried" in log             # require_stable: told to wait, not answered
        assert reading["count"] == 0
        assert "client_faults" not in results and "client_faults" not in meta
        assert "require_stable" not in page
