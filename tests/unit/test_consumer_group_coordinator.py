"""A consumer-protocol group inside the broker's GroupCoordinator (mock clock): a classic JoinGroup to it is
INCONSISTENT_GROUP_PROTOCOL, commits are checked by member epoch as Kafka's OffsetMetadataManager maps the
errors (a TxnOffsetCommit's stale epoch is ILLEGAL_GENERATION, a plain commit below v9 UNSUPPORTED_VERSION,
v9 to a group that does not exist GROUP_ID_NOT_FOUND), and the coordinator's expiry loop fences a silent
member on the broker's clock."""
from types import SimpleNamespace

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.consumer_group_manager import Heartbeat
from services.broker.consumer_group_member import FENCED_MEMBER_EPOCH, UNSUPPORTED_VERSION
from services.broker.group_coordinator import GroupCoordinator
from services.broker.metadata_cache import MetadataCache
from tests import helpers as h

pytestmark = pytest.mark.fast


@pytest.fixture
def gc():
    c = GroupCoordinator(SimpleNamespace(), MetadataCache(), time=MockTime())
    c.owns = lambda group: E.NONE
    yield c
    c.shutdown()


def join(gc, member_id):
    return gc.consumer_groups.heartbeat(Heartbeat("g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=1000,
                                                  subscribed_topic_names=["orders"], owned={}, api_version=1))


def test_a_classic_join_to_a_consumer_group_with_members_is_inconsistent(gc):
    assert join(gc, "m")["error_code"] == E.NONE
    r = gc.join(broker_pb2.JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                            protocol_type="consumer",
                                            protocols=[broker_pb2.GroupProtocol(name="range", metadata=b"")]))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_commits_to_a_consumer_group_are_checked_by_member_epoch(gc):
    epoch = join(gc, "m")["member_epoch"]
    assert gc._check_member("g", epoch, "m", api_version=9) == E.NONE
    assert gc._check_member("g", epoch, "m", api_version=8) == UNSUPPORTED_VERSION
    assert gc._check_member("g", epoch - 1, "m", transactional=True) == E.ILLEGAL_GENERATION   # stale
    assert gc._check_member("g", epoch + 1, "m", transactional=True) == FENCED_MEMBER_EPOCH
    assert gc._check_member("g", epoch, "zombie", transactional=True) == E.UNKNOWN_MEMBER_ID
    assert gc._check_member("nowhere", 3, "m", api_version=9) == E.GROUP_ID_NOT_FOUND
    assert gc._check_member("nowhere", 3, "m", api_version=8) == E.ILLEGAL_GENERATION


def test_the_expiry_loop_fences_a_silent_member_on_the_brokers_clock(gc):
    join(gc, "m")
    gc.time.sleep(gc.consumer_groups.session_timeout_ms / 1000.0 - 0.5)
    assert "m" in gc.consumer_groups.group("g").members
    gc.time.sleep(1.0)
    h.wait_for(lambda: "m" not in gc.consumer_groups.group("g").members, timeout=10, what="the member fenced")


def test_the_broker_s_group_consumer_settings_reach_the_groups():
    c = GroupCoordinator(SimpleNamespace(), MetadataCache(), time=MockTime(),
                         consumer_groups={"session_timeout_ms": 3000, "heartbeat_interval_ms": 250,
                                          "assignors": ("range",)})
    c.owns = lambda group: E.NONE
    try:
        assert join(c, "m")["heartbeat_interval_ms"] == 250
        assert c.consumer_groups.session_timeout_ms == 3000 and list(c.consumer_groups.assignors) == ["range"]
    finally:
        c.shutdown()


def test_a_broker_refuses_an_unknown_assignor_in_one_line():
    import subprocess
    import sys
    from tests.unit.test_config import BROKER, REPO
    r = subprocess.run([sys.executable, "-m", "services.broker", *BROKER, "--group-consumer-assignors=uniform,sticky"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip().startswith("python -m services.broker: --group-consumer-assignors: unknown consumer group "
                                       "assignors ['sticky']"), r.stderr
