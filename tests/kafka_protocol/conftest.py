"""Fixtures of the Kafka-protocol tests."""
import pytest


@pytest.fixture(scope="module")
def kcluster(eoslab_home):
    """A local cluster (3 brokers, 1 controller) for one test module's real clients."""
    pytest.importorskip("confluent_kafka")
    from tests.kafka_protocol.real_clients_support import start_kcluster
    yield from start_kcluster(eoslab_home)
