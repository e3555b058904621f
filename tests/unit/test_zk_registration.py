"""zk_paths.register_ephemeral, every service's registration: ZooKeeper trouble at any step is retried,
never raised out of the registering thread (a coordinator's thread died of a ConnectionLoss in the get
after NodeExists under the `loss` fault); an earlier session's znode is waited out, our own is taken."""
from types import SimpleNamespace

import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError

from services.common import zk_paths

pytestmark = pytest.mark.fast
OURS, EARLIER = 7, 3


class ScriptedZooKeeper:
    """kazoo's create/get/client_id, answering from a script of outcomes (an exception or an owner)."""

    def __init__(self, creates, gets):
        self.creates, self.gets, self.client_id = list(creates), list(gets), (OURS, b"")

    def create(self, path, data, ephemeral=False):
        assert ephemeral
        out = self.creates.pop(0)
        if isinstance(out, Exception):
            raise out

    def get(self, path):
        out = self.gets.pop(0)
        if isinstance(out, Exception):
            raise out
        return b"{}", SimpleNamespace(ephemeralOwner=out, czxid=100 + out)


def register(zk, stop_after=50):
    waits, earlier = [], []
    stat = zk_paths.register_ephemeral(zk, "/brokers/ids/1", b"{}", lambda: len(waits) >= stop_after,
                                       lambda: waits.append(1), lambda: earlier.append(1))
    return stat, len(waits), len(earlier)


def test_a_connection_loss_reading_back_an_existing_znode_is_retried_not_raised():
    zk = ScriptedZooKeeper([NodeExistsError(), NodeExistsError()], [ConnectionLoss(), OURS])
    stat, waits, _ = register(zk)
    assert stat.czxid == 100 + OURS and waits == 1


def test_an_earlier_sessions_znode_is_waited_out_and_one_of_ours_is_taken_as_made():
    zk = ScriptedZooKeeper([NodeExistsError(), NodeExistsError(), None],
                           [EARLIER, NoNodeError(), OURS])
    stat, waits, earlier = register(zk)
    assert stat.ephemeralOwner == OURS and (waits, earlier) == (1, 1)


def test_trouble_creating_is_retried_and_a_stop_ends_the_wait_with_nothing():
    zk = ScriptedZooKeeper([ConnectionLoss(), None], [OURS])
    assert register(zk)[0].ephemeralOwner == OURS
    zk = ScriptedZooKeeper([NodeExistsError()] * 3, [EARLIER] * 3)
    assert register(zk, stop_after=3) == (None, 3, 3)
