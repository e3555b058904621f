"""A ZooKeeper restart keeps the brokers' sessions, however long the server was down: a restarted
server gives every session it restores a fresh session timeout, and the broker reconnects within about
a second of the server's return (services.common.zk_client), as Kafka's brokers do. With kazoo's
default back-off the broker came back seconds later, its session expired, and it registered anew."""
import time

import pytest
from kazoo.client import KazooClient

from eoslab.common import auth
from tests import helpers as h

pytestmark = pytest.mark.integration
OUTAGE_S = 8.0          # longer than kazoo's default back-off reaches in its first attempts (0.1 s doubling)


def test_a_broker_keeps_its_session_through_a_zookeeper_restart(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0, session_timeout_ms=2000)
    zk_node = next(n for n in rt.info().nodes if n.role == "zookeeper")

    def owner():
        zk = KazooClient(hosts=zk_node.address, timeout=5, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
        zk.start(timeout=10)
        try:
            stat = zk.exists("/brokers/ids/1")
            return stat.ephemeralOwner if stat else None
        finally:
            zk.stop()
            zk.close()
    before = owner()
    assert before
    rt.kill("zookeeper")
    time.sleep(OUTAGE_S)                  # the fault itself: ZooKeeper stays down this long
    rt.start("zookeeper")
    h.wait_for(lambda: owner() is not None, 30, "the broker registered with ZooKeeper again")
    deadline = time.monotonic() + 3 * 2.0  # past the session timeout the restored sessions got at the restart
    while time.monotonic() < deadline:
        assert owner() == before, "the broker's session expired: it reconnected too late"
        time.sleep(0.5)
