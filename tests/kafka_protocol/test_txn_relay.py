"""Transaction coordinators behind the brokers (services.kafka_protocol.txn_relay): Kafka clients see the
brokers only, FindCoordinator names the broker that leads the id's __transaction_state partition, that
broker relays the id's requests to the lab's coordinator, and a real transactional producer goes on
after its coordinator dies."""
import socket
import uuid

import pytest

from services.common.internal_topics import TRANSACTION_STATE_TOPIC, partition_for
from tests import helpers as h
from tests.integration.test_transactions import coordinator_node
from tests.kafka_protocol.test_listener import _read_frame, _request, _response

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

NOT_COORDINATOR, FIND_COORDINATOR, INIT_PRODUCER_ID = 16, 10, 22


def _ask(address: str, api_key: int, version: int, **fields):
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(_request(api_key, version, 7, **fields))
        return _response(_read_frame(sock), api_key, version)[1]


def _txn_state_leaders(boot: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": boot})
    md = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=15)
    return {p: pm.leader for p, pm in md.topics[TRANSACTION_STATE_TOPIC].partitions.items()}


@pytest.fixture
def relay_cluster(make_cluster):
    return make_cluster(brokers=2, controllers=1, txn_coordinators=2)


def test_clients_see_the_brokers_only_and_find_the_leader_of_the_ids_partition(relay_cluster):
    info = relay_cluster.info()
    boot = info.kafka_bootstrap
    brokers = sorted(AdminClient({"bootstrap.servers": boot}).list_topics(timeout=15).brokers)
    assert brokers == [1, 2]                                     # no coordinator among them
    coordinator_node(relay_cluster.bootstrap_all(), "relay-a")   # the lab's coordinator owns the id's partition
    leaders = _txn_state_leaders(boot)
    want = leaders[partition_for("relay-a", len(leaders))]
    for addr in boot.split(","):
        r = _ask(addr, FIND_COORDINATOR, 3, key="relay-a", key_type=1)
        assert (r.error_code.value, r.node_id) == (0, want)
        assert f"{r.host}:{r.port}" in boot.split(",")
    [other] = [a for a in boot.split(",") if a != f"{r.host}:{r.port}"]
    r = _ask(other, INIT_PRODUCER_ID, 3, transactional_id="relay-a", transaction_timeout=60000,
             producer_id=-1, producer_epoch=-1)
    assert r.error_code.value == NOT_COORDINATOR                 # only the partition's leader coordinates it


def test_a_transactional_producer_commits_through_its_broker_and_after_its_coordinator_dies(relay_cluster):
    rt = relay_cluster
    boot = rt.info().kafka_bootstrap
    topic = f"relay-{uuid.uuid4().hex[:6]}"
    h.new_topic(rt.bootstrap_all(), topic, 1)
    tid = f"relay-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": boot, "transactional.id": tid, "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"first")
    p.commit_transaction(30)
    first = coordinator_node(rt.bootstrap_all(), tid)
    rt.kill(first)                                               # its partition moves to the other coordinator
    p.begin_transaction()
    p.produce(topic, value=b"second")
    p.commit_transaction(60)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"g-{tid}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []

    def both() -> bool:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
        return len(got) >= 2
    try:
        h.wait_for(both, 30, "both committed records")
    finally:
        c.close()
    assert got == [b"first", b"second"]
    assert coordinator_node(rt.bootstrap_all(), tid) != first
