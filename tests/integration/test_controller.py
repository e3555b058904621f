"""Controller: producer-id blocks never repeat, across racing controllers and a SIGKILLed active one."""
import threading
import time

import pytest
from kazoo.client import KazooClient

from eoslab.v1 import controller_pb2, controller_pb2_grpc
from eoslab.common import auth, rpc
from services.common import zk_paths
from services.controller.producer_id_manager import ProducerIdManager, parse_block
from tests import helpers as h

pytestmark = pytest.mark.integration


def _active_controller(rt) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for n in rt.info().by_role("controller"):
            if n.state != "running":
                continue
            with rpc.channel(n.address) as ch:
                try:
                    r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(
                        controller_pb2.DescribeClusterRequest(), timeout=2)
                except Exception:  # noqa: BLE001
                    continue
            if r.error == 0:
                return n.name
        time.sleep(0.1)
    raise AssertionError("no active controller")


def test_1000_pid_allocations_with_the_active_controller_killed_midway_are_distinct(make_cluster):
    rt = make_cluster(brokers=3, controllers=2, controller_args=["--pid-block-size", "10"])
    brokers = [n.address for n in rt.info().by_role("broker")]
    first_active = _active_controller(rt)
    pids = []
    for i in range(1000):
        if i == 500:
            rt.kill(first_active)
        pid, epoch = h.init_pid(brokers[i % 3])
        assert epoch == 0
        pids.append(pid)
    assert len(pids) == len(set(pids)) == 1000
    assert _active_controller(rt) != first_active        # the standby took over
    zk = KazooClient(hosts=rt.info().zookeeper)
    zk.start()
    try:
        block = parse_block(zk.get(zk_paths.LATEST_PRODUCER_ID_BLOCK)[0])
    finally:
        zk.stop()
    assert max(pids) <= block.last_id


def test_racing_controllers_claim_disjoint_blocks(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    clients, blocks, lock = [], [], threading.Lock()

    def claim(cid):     # as members do: with the cluster's secret (eoslab.common.auth.zk_kwargs)
        zk = KazooClient(hosts=rt.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
        zk.start()
        clients.append(zk)
        m = ProducerIdManager(zk, cid, block_size=7)
        for _ in range(40):
            b = m.generate_block(cid)
            with lock:
                blocks.append((b.first_id, b.last_id))

    threads = [threading.Thread(target=claim, args=(c,)) for c in (101, 102, 103)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for zk in clients:
        zk.stop()
    ids = [i for a, b in blocks for i in range(a, b + 1)]
    assert len(blocks) == 120
    assert len(ids) == len(set(ids)) == 120 * 7


def test_standby_answers_not_controller_and_create_topics_still_works(make_cluster):
    rt = make_cluster(brokers=1, controllers=2)
    active = _active_controller(rt)
    standby = next(n for n in rt.info().by_role("controller") if n.name != active)
    with rpc.channel(standby.address) as ch:
        r = controller_pb2_grpc.ControllerStub(ch).AllocateProducerIds(
            controller_pb2.AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1), timeout=5)
    assert r.error == 41  # NOT_CONTROLLER
    rt.kill(active)
    h.new_topic(rt.info().bootstrap, "after-failover", partitions=2)   # served by the new active one
    assert _active_controller(rt) == standby.name
