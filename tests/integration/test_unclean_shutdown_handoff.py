"""KIP-966 across a controller change: a broker back from an unclean shutdown that registers while no
controller is active is still taken out of every ISR and ELR (and off its leaderships) by the controller
that takes over, before it can lead with the tail it may have lost."""
import pytest
from kazoo.client import KazooClient

from services.common import zk_paths
from tests import helpers as h

pytestmark = pytest.mark.integration
V40 = ["--kafka-version=4.0"]


def _states(zk, topic: str, partitions: int) -> dict[int, tuple[dict, int]]:
    out = {}
    for p in range(partitions):
        data, stat = zk.get(zk_paths.partition_state_path(topic, p))
        out[p] = (zk_paths.decode(data), stat.version)
    return out


def test_a_broker_back_from_an_unclean_shutdown_while_no_controller_is_active_is_taken_out_by_the_next(
        make_cluster):
    rt = make_cluster(brokers=3, controllers=1, broker_args=V40, controller_args=V40)
    h.new_topic(rt.bootstrap_all(), "t", partitions=6)            # RF 3: the cluster's default
    zk = KazooClient(hosts=rt.info().zookeeper)
    zk.start()
    try:
        def all_in_sync():
            states = _states(zk, "t", 6)
            return states if all(len(st["isr"]) == 3 for st, _ in states.values()) else None
        before = h.wait_for(all_in_sync, 60, "every replica of every partition in sync")
        led = [p for p, (st, _) in before.items() if st["leader"] == 2]
        followed = [p for p, (st, _) in before.items() if st["leader"] != 2]
        assert led and followed, before
        rt.kill("controller-1")
        rt.kill("broker-2")                     # SIGKILL: no clean-shutdown marker in its log dir
        rt.start("broker-2")

        def registered_unclean():
            try:
                data, _ = zk.get(zk_paths.broker_path(2))
            except Exception:  # noqa: BLE001 - not registered yet
                return False
            return bool(zk_paths.decode(data).get(zk_paths.UNCLEAN_SHUTDOWN_KEY))
        h.wait_for(registered_unclean, 60, "broker 2 registered as back from an unclean shutdown")
        assert _states(zk, "t", 6) == before     # no controller: nothing moved meanwhile
        rt.start("controller-1")

        def moved():
            now = _states(zk, "t", 6)
            done = all(now[p][0]["leader"] != 2 and now[p][0]["leader_epoch"] > before[p][0]["leader_epoch"]
                       for p in led)
            done = done and all(now[p][1] > before[p][1] for p in followed)
            return now if done else None
        now = h.wait_for(moved, 60, "broker 2 off its leaderships and out of the ISRs it was in")
        for p in led:
            assert now[p][0]["leader"] in before[p][0]["isr"]
    finally:
        zk.stop()
