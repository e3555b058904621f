"""A service's start on ZooKeeper (services.common.zk_paths.connect) rides out ConnectionLoss.

On a starved machine a ZooKeeper call can fail with ConnectionLoss right after
the session started; a controller that let it through exited at start and
took its run down. The ZooKeeper here is real (one from a local cluster); the
client is kazoo's, with ensure_path failing the way a dropped connection makes
it fail, twice.
"""
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from eoslab.common import auth
from services.common import zk_paths

pytestmark = pytest.mark.integration


class DroppingClient(KazooClient):
    def __init__(self, *a, drops=2, **kw):
        super().__init__(*a, **kw)
        self.drops, self.calls = drops, 0

    def ensure_path(self, path, acl=None):
        self.calls += 1
        if self.drops:
            self.drops -= 1
            raise ConnectionLoss()
        return super().ensure_path(path, acl)


def test_connect_retries_a_lost_connection_instead_of_failing(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    zk_node = next(n for n in rt.info().nodes if n.role == "zookeeper")
    secret = auth.read_secret_file(rt.secret_path)
    zk = DroppingClient(hosts=zk_node.address, timeout=5, **auth.zk_kwargs(secret))
    try:
        zk_paths.connect(zk, ("/eoslab/test-connect",), timeout_s=20)
        assert zk.calls == 3 and zk.exists("/eoslab/test-connect")
    finally:
        zk.stop()
        zk.close()
