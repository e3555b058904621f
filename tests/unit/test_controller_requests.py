"""KafkaController's topic requests and AlterPartition are always answered, never raised: NOT_CONTROLLER
at a controller that is not active, REQUEST_TIMED_OUT for every item when its event thread does not get
to the request in time (seen in a chaos run: right after a ZooKeeper restart a controller's event thread
waited on ZooKeeper, the request's TimeoutError reached gRPC as a traceback and the broker's caller saw
only a deadline). No event thread runs here, so every request waits out its timeout."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, controller_pb2
from services.controller.kafka_controller import KafkaController

pytestmark = pytest.mark.fast


def controller(active: bool) -> KafkaController:
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1")
    c.active, c.request_timeout_s = active, 0.05
    return c


@pytest.mark.parametrize("active,code", [(True, E.REQUEST_TIMED_OUT), (False, E.NOT_CONTROLLER)])
def test_every_topic_request_gets_an_error_per_item(active, code):
    c = controller(active)
    created = c.create_topics(broker_pb2.CreateTopicsRequest(topics=[
        broker_pb2.CreatableTopic(name="a", num_partitions=1), broker_pb2.CreatableTopic(name="b", num_partitions=1)]))
    assert [(t.name, t.error) for t in created.topics] == [("a", code), ("b", code)]
    deleted = c.delete_topics(controller_pb2.DeleteTopicsRequest(names=["a"]))
    assert [(r.name, r.error) for r in deleted.results] == [("a", code)]
    grown = c.create_partitions(controller_pb2.CreatePartitionsRequest(
        topics=[controller_pb2.CreatePartitionsTopic(name="a", count=2)]))
    assert [(r.name, r.error) for r in grown.results] == [("a", code)]
    altered = c.alter_topic_configs(controller_pb2.AlterTopicConfigsRequest(
        topics=[controller_pb2.TopicConfigChange(topic="a")]))
    assert [(r.topic, r.error) for r in altered.results] == [("a", code)]


def test_an_isr_change_the_event_thread_does_not_reach_is_answered_request_timed_out():
    c = controller(True)
    r = c.alter_partition(controller_pb2.AlterPartitionRequest(broker_id=2, topic="a", partition=0, new_isr=[2]))
    assert r.error == E.REQUEST_TIMED_OUT
