"""KIP-447 with real clients: while a confluent-kafka transactional producer holds offsets of a group in an
open transaction (send_offsets_to_transaction, not yet committed), aiokafka, which does not send
require_stable, gets the group's last committed offset and the brokers count it (read as `eoslab app run`
reads it, cluster.apps.client_faults); confluent-kafka's consumer (read_committed: require_stable) is told to
retry instead and is not counted. Once the transaction commits, nothing more is counted."""
import asyncio
import uuid

import pytest

from cluster.apps.client_faults import read_unstable_fetches
from tests.helpers import wait_for
from tests.kafka_protocol.real_clients_support import _topic

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
aiokafka = pytest.importorskip("aiokafka")


def aiokafka_committed(boot: str, group: str, topic: str):
    async def fetch():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=boot.split(","), group_id=group, enable_auto_commit=False,
                                      client_id="aiokafka-kip447-test")
        await c.start()
        try:
            return await c.committed(aiokafka.TopicPartition(topic, 0))
        finally:
            await c.stop()
    return asyncio.run(fetch())


def confluent_committed(boot: str, group: str, topic: str, timeout_s: float):
    c = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False,
                                  "client.id": "rdkafka-kip447-test"})      # isolation.level read_committed
    try:
        return c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout_s)[0].offset
    finally:
        c.close()


def stable_offset(boot: str, group: str, topic: str):
    """confluent-kafka's committed offset, None while it still meets a pending commit."""
    try:
        return confluent_committed(boot, group, topic, 5)
    except confluent_kafka.KafkaException:
        return None


def test_only_the_client_without_require_stable_is_counted_while_offsets_are_pending(kcluster):
    info = kcluster.info()
    boot = info.kafka_bootstrap
    topic, group = _topic(boot, "kip447"), f"kip447-{uuid.uuid4().hex[:6]}"
    assert read_unstable_fetches(info, group)["count"] == 0
    meta_consumer = confluent_kafka.Consumer({"bootstrap.servers": boot, "group.id": group})
    p = confluent_kafka.Producer({"bootstrap.servers": boot, "transactional.id": f"kip447-{uuid.uuid4().hex[:6]}",
                                  "transaction.timeout.ms": 60000})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"x", partition=0)
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 0, 5)],
                                      meta_consumer.consumer_group_metadata(), 30)   # pending: no commit yet

        assert aiokafka_committed(boot, group, topic) is None       # the stale answer: nothing committed yet
        r = read_unstable_fetches(info, group)
        assert r["count"] == 1 and r["client_ids"] == ["aiokafka-kip447-test"] and not r["unread"]
        assert len(r["brokers"]) == 3

        with pytest.raises(confluent_kafka.KafkaException):      # UNSTABLE_OFFSET_COMMIT, retried to its timeout
            confluent_committed(boot, group, topic, 3)
        assert read_unstable_fetches(info, group)["count"] == 1

        p.commit_transaction(30)
        wait_for(lambda: stable_offset(boot, group, topic) == 5, timeout=20,
                 what="the committed transaction's offset")
        assert aiokafka_committed(boot, group, topic) == 5      # nothing pending: the right answer, not counted
        assert read_unstable_fetches(info, group)["count"] == 1
    finally:
        meta_consumer.close()
        p.flush(10)
