"""The controller follows the brokers' dynamic cluster default (/config/brokers/<default>), as a
ZooKeeper-mode Kafka controller reads its broker's reconfigured log defaults: turning
unclean.leader.election.enable on there elects an offline partition whose topic does not set it."""
import pytest
from kazoo.client import KazooClient

from eoslab.common import auth
from eoslab.common.config_ops import SET
from services.broker.dynamic_config import DynamicBrokerConfig
from tests import helpers as h
from tests.integration.test_replication import _describe, _leader_name

pytestmark = pytest.mark.integration


def test_a_cluster_default_turning_unclean_election_on_elects_the_offline_partition(make_cluster):
    rt = make_cluster(brokers=3, controllers=1)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "offline")                       # no unclean.leader.election.enable of its own
    leader = _leader_name(md, "offline")
    followers = [f"broker-{b}" for b in range(1, 4) if f"broker-{b}" != leader]
    for f in followers:
        rt.pause(f)                                         # the ISR shrinks to the leader
    h.wait_for(lambda: (s := _describe(rt, "offline")) and list(s.isr) == [int(leader.split("-")[1])],
               what="ISR = leader only")
    rt.kill(leader)
    for f in followers:
        rt.resume(f)
    h.wait_for(lambda: (s := _describe(rt, "offline")) and s.leader == -1, what="the partition offline")
    zk = KazooClient(hosts=rt.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
    zk.start()
    try:
        # still offline: no election of an out-of-sync replica while nothing allows it
        assert _describe(rt, "offline").leader == -1
        err, _ = DynamicBrokerConfig(zk, broker_id=-1).alter(
            "", [("unclean.leader.election.enable", SET, "true")], True, False)
        assert err == 0
        h.wait_for(lambda: (s := _describe(rt, "offline")) and f"broker-{s.leader}" in followers, timeout=30,
                   what="an unclean leader elected under the cluster default")
    finally:
        zk.stop()
        zk.close()
