"""Metadata and admin time rules on a MockTime (no cluster: fake stubs).

- ClusterMetadata: an address whose Metadata call timed out (DEADLINE_EXCEEDED) is asked last for
  10 s of the clock, then takes its turn again;
- admin.create_topic: waits for a leader of every partition for its timeout of the clock, then raises
  LEADER_NOT_AVAILABLE (not before).
No test sleeps: the clock moves only when a test (or the code's back-off sleep on the MockTime) moves it.
"""
import grpc
import pytest

from clients.admin import create_topic
from clients.metadata import ClusterMetadata
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2

pytestmark = pytest.mark.fast


class DeadlineExceeded(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.DEADLINE_EXCEEDED


class FakeBroker:
    def __init__(self, address, slow=False):
        self.address, self.slow, self.asked = address, slow, 0

    def Metadata(self, req, timeout):
        self.asked += 1
        if self.slow:
            raise DeadlineExceeded()
        return broker_pb2.MetadataResponse(brokers=[common_pb2.BrokerEndpoint(broker_id=1, host="a", port=1)])


def test_an_address_that_timed_out_is_asked_last_for_ten_seconds_of_the_clock():
    clock = MockTime()
    md = ClusterMetadata("a:1,b:1", time=clock)
    brokers = {"a:1": FakeBroker("a:1"), "b:1": FakeBroker("b:1", slow=True)}
    md.stub = brokers.__getitem__
    md._turn = 0                     # the next call starts its rotation at b:1
    md.refresh()                     # b:1 times out, a:1 answers
    assert brokers["b:1"].asked == 1
    for _ in range(3):               # whatever the rotation, b:1 comes last
        assert md.addresses()[-1] == "b:1"
    clock.advance(9.999)
    assert all(md.addresses()[-1] == "b:1" for _ in range(3))
    clock.advance(0.002)
    assert {md.addresses()[0] for _ in range(2)} == {"a:1", "b:1"}   # back in the rotation
    md.close()


class NoLeaders:
    """The topic is created but no partition ever gets a leader."""

    def __init__(self, clock):
        self.time, self.refreshes = clock, []

    def any_broker(self):
        return "b1:1"

    def stub(self, address):
        return self

    def CreateTopics(self, req, timeout):
        return broker_pb2.CreateTopicsResponse(topics=[broker_pb2.CreateTopicResult(name="x", error=E.NONE)])

    def refresh(self, topics=None):
        self.refreshes.append(self.time.monotonic())
        assert len(self.refreshes) < 10_000, "waited without end"

    def partitions_for(self, topic):
        return 2

    def leader(self, topic, partition):
        return None


def test_create_topic_waits_for_leaders_for_its_timeout_of_the_clock():
    clock = MockTime()
    md = NoLeaders(clock)
    start = clock.monotonic()
    with pytest.raises(KafkaError) as e:
        create_topic(md, "x", 2, timeout=5.0)
    assert e.value.code == E.LEADER_NOT_AVAILABLE
    assert len(md.refreshes) > 40                           # asked again every 100 ms
    assert 5.0 < md.refreshes[-1] - start <= 5.1 + 1e-9     # until the timeout of the clock had passed
