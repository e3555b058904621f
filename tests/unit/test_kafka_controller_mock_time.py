"""KafkaController and its ControllerChannelManager on a MockTime: their retries wait on the injected clock.

Guarantees checked here (no ZooKeeper, no broker: the failing step is faked):
- a controller event that fails while the controller is active is retried
  0.2 s of the controller's clock later, not before; `stop()` ends that wait
  at once;
- a failed send to a broker is retried after a backoff on the controller's
  clock (50 ms, then doubling), not before; closing the channel manager ends
  the backoff at once; a broker that refuses the UpdateMetadata gets no
  LeaderAndIsr until it takes one;
- a BrokerChange that fails midway keeps the brokers it saw go (or bounce)
  owed, so its retry still fails them over;
- the /controller znode's timestamp is the clock's wall time.
"""
import threading

import grpc
import pytest

from eoslab.common.time import MOCK_EPOCH_MS, MockTime
from services.common import zk_paths
from services.controller import controller_events as ev
from services.controller import kafka_controller
from services.controller.channel_manager import ControllerChannelManager
from services.controller.kafka_controller import KafkaController
from tests import helpers as h

pytestmark = pytest.mark.fast
STILL = 0.1             # real seconds given to a waiter that must NOT return




@pytest.fixture
def controller(monkeypatch):
    clock = MockTime()
    calls = []

    def reassign(c):            # the coordinator reassignment fails once, then works
        calls.append(c)
        if len(calls) == 1:
            raise RuntimeError("zookeeper said no")
    monkeypatch.setattr(kafka_controller, "reassign_txn_coordinators", reassign)
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", time=clock)
    c.active = True
    c._thread.start()
    yield c, clock, calls
    c.stop()
    c._thread.join(5)


def test_a_failed_event_is_retried_after_200_ms_of_the_clock(controller):
    c, clock, calls = controller
    c.events.put(ev.CoordinatorChange())
    h.wait_for(lambda: len(calls) == 1 and clock.waiters() == 1)
    clock.advance_ms(199)
    threading.Event().wait(STILL)
    assert len(calls) == 1
    clock.advance_ms(1)
    h.wait_for(lambda: len(calls) == 2)


def test_stop_ends_the_retry_wait_without_the_clock_moving(controller):
    c, clock, calls = controller
    c.events.put(ev.CoordinatorChange())
    h.wait_for(lambda: len(calls) == 1 and clock.waiters() == 1)
    c.stop()
    c._thread.join(5)
    assert not c._thread.is_alive() and clock.milliseconds() == MOCK_EPOCH_MS


def test_the_controller_znode_carries_the_wall_clock(monkeypatch):
    clock = MockTime()
    clock.set_wall_ms(MOCK_EPOCH_MS + 42)
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", time=clock)
    written = {}

    class Stop(Exception):
        pass

    def create(path, data, ephemeral=False):
        written[path] = zk_paths.decode(data)
        raise Stop()
    monkeypatch.setattr(c.zk, "create", create)
    with pytest.raises(Stop):
        c._elect()
    assert written[zk_paths.CONTROLLER]["timestamp"] == str(MOCK_EPOCH_MS + 42)


class Unavailable(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE


class FailingStub:
    def __init__(self):
        self.attempts = 0

    def UpdateMetadata(self, request, timeout=None):
        self.attempts += 1
        raise Unavailable()


def test_a_failed_send_backs_off_on_the_clock_and_close_ends_the_backoff():
    clock = MockTime()
    mgr = ControllerChannelManager(lambda broker_id: (object(), object()), lambda: None, time=clock)
    mgr.set_brokers({1: "127.0.0.1:9"})
    sender = mgr._senders[1]
    stub = sender.stub = FailingStub()
    mgr.send_all()
    for attempt, backoff_ms in ((1, 50), (2, 100)):
        h.wait_for(lambda: stub.attempts == attempt and clock.waiters() == 1)
        clock.advance_ms(backoff_ms - 1)
        threading.Event().wait(STILL)
        assert stub.attempts == attempt                    # one millisecond early: still backing off
        clock.advance_ms(1)
    h.wait_for(lambda: stub.attempts == 3 and clock.waiters() == 1)
    mgr.close()
    sender.join(5)
    assert not sender.is_alive() and stub.attempts == 3


class RefusingOnceStub:
    """A broker that refuses the first UpdateMetadata as meant for another of its processes (it registers
    just after): the calls it gets, in order."""

    def __init__(self):
        self.calls = []

    def UpdateMetadata(self, request, timeout=None):
        from eoslab.v1 import broker_pb2, common_pb2
        self.calls.append("UpdateMetadata")
        first = self.calls.count("UpdateMetadata") == 1
        return broker_pb2.UpdateMetadataResponse(error=common_pb2.STALE_BROKER_EPOCH if first else common_pb2.NONE)

    def LeaderAndIsr(self, request, timeout=None):
        from eoslab.v1 import broker_pb2
        self.calls.append("LeaderAndIsr")
        return broker_pb2.LeaderAndIsrResponse()


def test_no_leader_and_isr_goes_to_a_broker_that_refused_the_update_metadata_before_it():
    """A broker that registers between the two requests would take the LeaderAndIsr with no topic configs
    in its metadata and make its partitions with the broker's defaults (min.insync.replicas 1, so a
    sole-ISR leader acknowledges acks=all writes). LeaderAndIsr waits for an UpdateMetadata the broker
    took."""
    from eoslab.v1 import broker_pb2
    clock = MockTime()
    mgr = ControllerChannelManager(lambda broker_id: (broker_pb2.UpdateMetadataRequest(),
                                                      broker_pb2.LeaderAndIsrRequest()), lambda: None, time=clock)
    mgr.set_brokers({1: "127.0.0.1:9"})
    stub = mgr._senders[1].stub = RefusingOnceStub()
    mgr.send_all()
    h.wait_for(lambda: stub.calls and clock.waiters() == 1)
    assert stub.calls == ["UpdateMetadata"]                 # refused: nothing else sent, backing off
    clock.advance_ms(50)
    h.wait_for(lambda: len(stub.calls) == 3)
    assert stub.calls == ["UpdateMetadata", "UpdateMetadata", "LeaderAndIsr"]
    mgr.close()


class FakeZk:
    """Just enough of ZooKeeper for an election: /controller and /controller_epoch."""

    def __init__(self):
        self.nodes = {}

    def create(self, path, data=b"", ephemeral=False):
        from kazoo.exceptions import NodeExistsError
        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = data

    def get(self, path):
        from kazoo.exceptions import NoNodeError
        if path not in self.nodes:
            raise NoNodeError()
        return self.nodes[path], type("Stat", (), {"version": 0})()

    def set(self, path, data, version=-1):
        self.nodes[path] = data
        return type("Stat", (), {"version": 1})()

    def delete(self, path):
        self.nodes.pop(path, None)


def test_a_failover_that_fails_midway_resigns_so_that_a_new_election_loads_everything(monkeypatch):
    """Kafka's elect(): an exception in onControllerFailover triggers a controller move. Without it the
    controller stayed active with some topics never loaded, and their partitions never got a leader."""
    from kazoo.exceptions import ConnectionLoss
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", time=MockTime())
    zk = FakeZk()
    monkeypatch.setattr(c, "zk", zk)
    loads = []

    def failover():
        loads.append(1)
        if len(loads) == 1:
            raise ConnectionLoss()          # ZooKeeper lost in the middle of loading the topics
    monkeypatch.setattr(c, "_on_become_active", failover)
    c._elect()
    assert not c.active and zk_paths.CONTROLLER not in zk.nodes      # resigned: the others may elect
    c._elect()                                                         # the watch's new election
    assert c.active and len(loads) == 2


def test_a_controller_znode_of_ours_left_behind_is_deleted_for_a_new_election(monkeypatch):
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", time=MockTime())
    zk = FakeZk()
    monkeypatch.setattr(c, "zk", zk)
    zk.nodes[zk_paths.CONTROLLER] = zk_paths.encode({"brokerid": 1})    # ours, but this controller is not active
    c._elect()
    assert zk_paths.CONTROLLER not in zk.nodes
    zk.nodes[zk_paths.CONTROLLER] = zk_paths.encode({"brokerid": 2})    # another's: left alone
    c._elect()
    assert zk.nodes[zk_paths.CONTROLLER] == zk_paths.encode({"brokerid": 2})


def test_a_broker_change_that_fails_midway_still_fails_over_the_bounced_broker_on_its_retry(monkeypatch):
    """Broker 1 bounced (the same id, a new broker epoch) and the election that takes its leaderships
    failed (ZooKeeper out of reach). The retried event must elect again without broker 1: it used to read
    the broker list it had already stored, see no change, and leave broker 1's new process leading."""
    from services.controller.context import BrokerInfo
    clock = MockTime()
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", time=clock)
    c.active = True
    c.ctx.brokers = {1: BrokerInfo(1, "h", 1, epoch=10), 2: BrokerInfo(2, "h", 2, epoch=20)}
    bounced = {1: BrokerInfo(1, "h", 1, epoch=11), 2: BrokerInfo(2, "h", 2, epoch=20)}

    def load():
        c.ctx.brokers = dict(bounced)
        return c.ctx.brokers

    elections = []

    def elect(gone):
        elections.append(set(gone))
        if len(elections) == 1:
            raise RuntimeError("ZooKeeper connection lost")

    monkeypatch.setattr(c, "_load_brokers", load)
    monkeypatch.setattr(c, "_elect_offline_partitions", elect)
    monkeypatch.setattr(c, "_unclean_shutdowns_owed", lambda: set())
    monkeypatch.setattr(c, "_sync_channels", lambda: None)
    with pytest.raises(RuntimeError):
        c._on_broker_change()
    c._on_broker_change()                               # the event loop's retry
    assert elections == [{1}, {1}, set()]               # its failure, then its startup (online partitions)
    c._on_broker_change()                               # handled: nothing owed any more
    assert elections[3:] == [set()]
