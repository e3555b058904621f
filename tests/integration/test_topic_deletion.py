"""Topic deletion on a real cluster when a replica's broker is down: the topic leaves ZooKeeper and
Metadata at once; the dead broker's replica is deleted when it comes back (the controller owes it a
StopReplica), and until then the name cannot be taken again."""
import os

import pytest
from kazoo.client import KazooClient

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, controller_pb2, controller_pb2_grpc
from eoslab.common import rpc
from services.common import zk_paths
from tests import helpers as h

pytestmark = pytest.mark.integration


def _controller(rt):
    return next(n for n in rt.info().nodes if n.role == "controller")


def test_a_replica_on_a_dead_broker_is_deleted_when_it_comes_back(make_cluster):
    rt = make_cluster(brokers=3, controllers=1)
    h.new_topic(rt.info().bootstrap, "doomed", partitions=1)
    replica_dirs = {n: os.path.join(rt.dir, "data", n, "doomed-0") for n in ("broker-1", "broker-2", "broker-3")}
    h.wait_for(lambda: all(os.path.isdir(d) for d in replica_dirs.values()), timeout=30, what="three replicas")
    rt.kill("broker-3")
    c = _controller(rt)
    with rpc.channel(f"{c.host}:{c.port}") as ch:
        stub = controller_pb2_grpc.ControllerStub(ch)
        r = stub.DeleteTopics(controller_pb2.DeleteTopicsRequest(names=["doomed"]), timeout=30).results[0]
        assert r.error == E.NONE, r
        zk = KazooClient(hosts=rt.info().zookeeper)          # znodes are world-readable
        zk.start()
        try:
            assert not zk.exists(zk_paths.topic_path("doomed"))
        finally:
            zk.stop()
        h.wait_for(lambda: not os.path.isdir(replica_dirs["broker-1"]) and not os.path.isdir(replica_dirs["broker-2"]),
                   timeout=30, what="the live replicas deleted")
        assert os.path.isdir(replica_dirs["broker-3"])                  # its broker never heard of it
        again = stub.CreateTopics(broker_pb2.CreateTopicsRequest(topics=[
            broker_pb2.CreatableTopic(name="doomed", num_partitions=1)]), timeout=30).topics[0]
        assert again.error == E.TOPIC_ALREADY_EXISTS and "marked for deletion" in again.error_message
        rt.start("broker-3")
        h.wait_for(lambda: not os.path.isdir(replica_dirs["broker-3"]), timeout=60, what="the late replica deleted")
        created = h.wait_for(lambda: (lambda t: t if t.error == E.NONE else None)(stub.CreateTopics(
            broker_pb2.CreateTopicsRequest(topics=[broker_pb2.CreatableTopic(name="doomed", num_partitions=1)]),
            timeout=30).topics[0]), timeout=30, what="the name taken again")
        assert created.num_partitions == 1


def test_a_replica_owed_a_deletion_is_deleted_after_a_controller_restart(make_cluster):
    """What is owed lives in /admin/delete_topics too: a controller that becomes active after the
    deletion still stops and deletes the replica of a broker that was down, and then drops the marker."""
    rt = make_cluster(brokers=3, controllers=1)
    h.new_topic(rt.info().bootstrap, "doomed2", partitions=1)
    late = os.path.join(rt.dir, "data", "broker-3", "doomed2-0")
    h.wait_for(lambda: os.path.isdir(late), timeout=30, what="broker-3's replica")
    rt.kill("broker-3")
    c = _controller(rt)
    with rpc.channel(f"{c.host}:{c.port}") as ch:
        r = controller_pb2_grpc.ControllerStub(ch).DeleteTopics(
            controller_pb2.DeleteTopicsRequest(names=["doomed2"]), timeout=30).results[0]
        assert r.error == E.NONE, r
    zk = KazooClient(hosts=rt.info().zookeeper)
    zk.start()
    try:
        assert zk.exists(zk_paths.delete_topic_path("doomed2"))
        rt.kill(c.name)                                   # the controller that knew what was owed
        rt.start(c.name)
        rt.start("broker-3")
        h.wait_for(lambda: not os.path.isdir(late), timeout=90, what="the late replica deleted by the new controller")
        h.wait_for(lambda: not zk.exists(zk_paths.delete_topic_path("doomed2")), timeout=30, what="the marker gone")
    finally:
        zk.stop()
