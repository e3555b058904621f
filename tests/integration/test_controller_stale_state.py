"""A partition-state write that finds the znode at another version, on a real ZooKeeper: the controller
reads that partition's state again before its event is retried (as Kafka's elections re-read the states
they retry). It used to keep its stale cached version, so every retry failed the same way, each with a
traceback (a false-alarm sweep's lab error, 2026-11-27: a write whose answer a connection loss took).
The controller runs in-process on its own ZooKeeper chroot beside a real cluster's."""
import os
import uuid

import pytest
from kazoo.client import KazooClient

from eoslab.common import auth
from services.common import zk_paths
from services.controller.context import LeaderIsr
from services.controller.kafka_controller import KafkaController
from services.controller.partition_state_machine import StalePartitionState

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def zk(eoslab_home):
    from cluster.local import LocalRuntime
    rt = LocalRuntime(f"t-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}-stale-{uuid.uuid4().hex[:6]}",
                      home=eoslab_home, brokers=1, controllers=1)
    rt.up()
    chroot = f"/stale-{uuid.uuid4().hex[:6]}"
    client = KazooClient(hosts=rt.info().zookeeper + chroot, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
    client.start()
    yield client
    client.stop()
    client.close()
    rt.down()


def test_a_write_that_finds_another_version_reads_the_state_again_and_the_retry_succeeds(zk):
    zk.ensure_path("/")
    _, epoch_stat = zk.create(zk_paths.CONTROLLER_EPOCH, b"4", makepath=True, include_data=True)
    path = zk_paths.partition_state_path("t", 0)
    written = LeaderIsr(1, 5, [1, 2], 4, zk_version=0)
    zk.create(path, zk_paths.encode(written.to_json()), makepath=True)
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1")           # not started: its state set by hand
    c.zk, c.active, c.epoch, c.epoch_zk_version = zk, True, 4, epoch_stat.version
    c.ctx.states[("t", 0)] = LeaderIsr(1, 5, [1, 2], 4, zk_version=0)
    # the znode moves on without the controller (as when its own write's answer was lost)
    moved = LeaderIsr(2, 6, [2], 4, zk_version=0)
    zk.set(path, zk_paths.encode(moved.to_json()))
    with pytest.raises(StalePartitionState):
        c._write_state("t", 0, LeaderIsr(2, 6, [2, 1], 4))
    cached = c.ctx.states[("t", 0)]
    assert (cached.leader, cached.leader_epoch, cached.isr, cached.zk_version) == (2, 6, [2], 1)
    c._write_state("t", 0, LeaderIsr(2, 7, [2, 1], 4))                # the retry, from the fresh state
    data, stat = zk.get(path)
    assert (zk_paths.decode(data)["leader_epoch"], stat.version) == (7, 2)
    assert c.ctx.states[("t", 0)].zk_version == 2
