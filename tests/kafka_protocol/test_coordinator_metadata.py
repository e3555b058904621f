"""A transaction coordinator's Kafka Metadata answers: clients send it Metadata like any node, and when no
broker answers it, it answers from what it last saw, never with an empty topic list."""
import os
import uuid

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture
def small_cluster(eoslab_home):
    from cluster.local import LocalRuntime
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-cmd-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=1, controllers=1,
                      txn_coordinators=1)
    rt.up()
    yield rt
    rt.down()


def _topics_from(address: str) -> dict:
    """Metadata as librdkafka gets it from this one node (its only bootstrap)."""
    admin = AdminClient({"bootstrap.servers": address, "topic.metadata.refresh.interval.ms": 100})
    return {name: sorted(p.leader for p in t.partitions.values()) for name, t in admin.list_topics(timeout=15).topics.items()}


def test_a_coordinator_cut_off_from_the_brokers_answers_metadata_from_what_it_last_saw(small_cluster):
    from cluster.local import KAFKA_PORT
    rt = small_cluster
    info = rt.info()
    coordinator = f"{info.by_role('txn-coordinator')[0].host}:{KAFKA_PORT}"
    name = f"kept-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": info.kafka_bootstrap})
    for f in admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=30).values():
        f.result(30)
    assert wait_for(lambda: _topics_from(coordinator).get(name) == [1, 1], timeout=30)
    rt.kill("broker-1")                            # no broker answers the coordinator now
    got = _topics_from(coordinator)
    assert got.get(name) == [1, 1], got            # an empty list made clients forget the partitions' leaders


def _metadata_from(address: str, topic: str) -> int:
    """One Kafka Metadata request (v9, naming `topic`, auto-creation allowed) to this node alone: the
    topic's error code."""
    import socket
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(_request(3, 9, 1, topics=[{"name": topic}], allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False))
        _, resp = _response(_read_frame(sock), 3, 9)
    [t] = [t for t in resp.topics if t.name == topic]
    return t.error_code


def test_a_topic_first_named_to_a_coordinator_is_auto_created_as_a_broker_would(small_cluster):
    """Clients send Metadata to any node they know, coordinators included: a new topic named there is
    created by a broker (auto.create.topics.enable) and answered LEADER_NOT_AVAILABLE, not
    UNKNOWN_TOPIC_OR_PARTITION for ever (librdkafka's test 0103 timed out on it)."""
    from cluster.local import KAFKA_PORT
    info = small_cluster.info()
    coordinator = f"{info.by_role('txn-coordinator')[0].host}:{KAFKA_PORT}"
    name = f"auto-{uuid.uuid4().hex[:6]}"
    assert _metadata_from(coordinator, name) == 5                       # LEADER_NOT_AVAILABLE: being created
    assert wait_for(lambda: _metadata_from(coordinator, name) == 0, timeout=30)
    assert _metadata_from(coordinator, "bad/name") == 17                # INVALID_TOPIC_EXCEPTION
