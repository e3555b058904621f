"""Bounds on what one request may hold: long polls (capped wait, cancellation, a limit on parked client
fetches), group session timeouts, topic config ranges. In-process, on the real broker classes."""
import threading
import time

import pytest

from eoslab.v1 import broker_pb2, common_pb2
from services.broker import replica_manager as rm_mod
from services.broker.membership import GroupMembership
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.broker.replica_manager import ReplicaManager
from eoslab.common.topics import validate_configs

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


@pytest.fixture
def rm(tmp_path):
    m = ReplicaManager(1, str(tmp_path), LogConfig(), MetadataCache())
    yield m
    m.shutdown()


def _poll(max_wait_ms: int) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, partitions=[
        broker_pb2.FetchPartition(topic="t", partition=0, fetch_offset=0)])


def _timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def test_a_cancelled_long_poll_returns_at_once(rm):
    cancelled = threading.Event()
    threading.Timer(0.3, lambda: (cancelled.set(), rm.wake_fetches())).start()
    assert _timed(lambda: rm.fetch(_poll(2 ** 31 - 1), cancelled)) < 2.0


def test_long_poll_wait_is_capped(rm, monkeypatch):
    monkeypatch.setattr(rm_mod, "MAX_FETCH_WAIT_MS", 300)
    assert _timed(lambda: rm.fetch(_poll(2 ** 31 - 1))) < 2.0


def test_parked_client_fetches_are_limited_and_freed_when_cancelled(rm):
    cancel = threading.Event()
    threads = [threading.Thread(target=rm.fetch, args=(_poll(30000), cancel))
               for _ in range(rm_mod.MAX_PARKED_CLIENT_FETCHES)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while rm.parked_client_fetches < rm_mod.MAX_PARKED_CLIENT_FETCHES and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rm.parked_client_fetches == rm_mod.MAX_PARKED_CLIENT_FETCHES
    assert _timed(lambda: rm.fetch(_poll(5000))) < 1.0          # no room to wait: answered at once
    cancel.set()
    rm.wake_fetches()
    for t in threads:
        t.join(2.0)
        assert not t.is_alive()
    assert rm.parked_client_fetches == 0
    assert 0.4 < _timed(lambda: rm.fetch(_poll(500))) < 3.0     # room again: it waits its max_wait


@pytest.mark.parametrize("session_ms,rebalance_ms", [(2 ** 31 - 1, 0), (0, 0), (999, 0), (-1, 0),
                                                     (6000, 2 ** 31 - 1)])
def test_join_group_session_timeout_out_of_bounds(session_ms, rebalance_ms):
    r = GroupMembership().join(broker_pb2.JoinGroupRequest(group_id="g", session_timeout_ms=session_ms,
                                                           rebalance_timeout_ms=rebalance_ms, topics=["t"]))
    assert r.error == E.INVALID_SESSION_TIMEOUT


def test_join_group_in_bounds_is_served():
    r = GroupMembership(initial_rebalance_delay_s=0).join(broker_pb2.JoinGroupRequest(
        group_id="g", session_timeout_ms=1500, rebalance_timeout_ms=1500, topics=["t"]))
    assert r.error == E.NONE and r.generation_id >= 1


@pytest.mark.parametrize("configs,ok", [
    ({"max.message.bytes": "1" + "0" * 40}, False), ({"max.message.bytes": "2147483648"}, False),
    ({"max.message.bytes": "2147483647"}, True), ({"segment.bytes": "13"}, False), ({"segment.bytes": "14"}, True),
    ({"min.insync.replicas": "0"}, False), ({"min.insync.replicas": "-3"}, False),
    ({"unclean.leader.election.enable": "maybe"}, False), ({"bogus": "1"}, False)])
def test_topic_configs_are_range_checked(configs, ok):
    assert (validate_configs(configs) is None) == ok
