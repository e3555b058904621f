"""A broker forwards an admin request through a controller failover, as Kafka's forwarding manager
queues it until a controller answers, instead of failing it with NOT_CONTROLLER at the first refused
connection."""
import threading

import pytest
from kazoo.client import KazooClient

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.common import zk_paths
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_create_topics_waits_for_a_restarted_controller(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    broker = rt.info().node("broker-1").address
    rt.kill("controller-1")     # its ZooKeeper node and address linger until its session expires
    answer = {}

    def create():
        answer["r"] = h.broker_stub(broker).CreateTopics(broker_pb2.CreateTopicsRequest(topics=[
            broker_pb2.CreatableTopic(name="after-failover", num_partitions=1)]), timeout=60).topics[0]

    t = threading.Thread(target=create)
    t.start()
    zk = KazooClient(hosts=rt.info().zookeeper)
    zk.start()
    try:    # the dead controller's session expires: from then on the broker knows of no controller at all
        h.wait_for(lambda: zk.exists(zk_paths.CONTROLLER) is None, 30, "the dead controller's znode to go")
    finally:
        zk.stop()
    assert t.is_alive(), answer      # held, not answered NOT_CONTROLLER at the first refused connection
    rt.start("controller-1")
    t.join(60)
    assert not t.is_alive()
    r = answer["r"]
    assert (r.error, r.error_message) == (E.NONE, "")
    h.new_topic(rt.info().bootstrap, "after-failover")     # Metadata knows it (idempotent on an existing topic)


def test_create_topics_still_fails_when_no_controller_comes_back(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    broker = rt.info().node("broker-1").address
    rt.kill("controller-1")
    r = h.broker_stub(broker).CreateTopics(broker_pb2.CreateTopicsRequest(topics=[
        broker_pb2.CreatableTopic(name="never", num_partitions=1)]), timeout=60).topics[0]
    assert r.error == E.NOT_CONTROLLER, r
