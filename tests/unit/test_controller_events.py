"""The controller's events (services.controller.controller_events) as KafkaController.process takes them:
one class per event, only the membership events retried, a Call's result or exception handed to its caller,
anything else refused."""
import concurrent.futures

import pytest

from services.controller import controller_events as ev
from services.controller.kafka_controller import KafkaController

pytestmark = pytest.mark.fast


def test_only_membership_and_election_events_are_retried():
    retried = {cls.__name__ for cls in (ev.Elect, ev.BrokerChange, ev.CoordinatorChange, ev.Reconnected,
                                        ev.ShutdownEventThread) if cls.retry_on_failure}
    assert retried == {"Elect", "BrokerChange", "CoordinatorChange"}
    assert not ev.Resign("x").retry_on_failure and ev.Resign("x").name == "Resign"


def test_a_call_hands_its_result_and_its_exception_to_the_caller():
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1")     # not started: process() runs inline here
    ok, bad = concurrent.futures.Future(), concurrent.futures.Future()
    c.process(ev.Call(lambda: 42, ok))
    c.process(ev.Call(lambda: 1 / 0, bad))
    assert ok.result(0) == 42
    with pytest.raises(ZeroDivisionError):
        bad.result(0)
    with pytest.raises(TypeError):
        c.process(("broker_change",))          # the old string tuples are no event


def test_an_isr_change_with_zookeeper_gone_is_answered_not_controller(tmp_path):
    """The write of the new ISR fails because the ZooKeeper session is gone (here: never there): the leader
    gets NOT_CONTROLLER to retry elsewhere, not an exception on the wire (gRPC UNKNOWN and a traceback)."""
    from eoslab.common.errors import E
    from eoslab.v1 import controller_pb2
    from services.controller.context import BrokerInfo, LeaderIsr
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1")
    c.active, c.epoch = True, 3
    c.ctx.brokers.update({b: BrokerInfo(b, "127.0.0.1", 1, b) for b in (1, 2)})
    c.ctx.assignments["t"] = {0: [1, 2]}
    c.ctx.states[("t", 0)] = LeaderIsr(1, 5, [1, 2], 3, zk_version=7)
    c._thread.start()
    try:
        r = c.alter_partition(controller_pb2.AlterPartitionRequest(broker_id=1, broker_epoch=1, topic="t",
                                                                   partition=0, leader_epoch=5, partition_epoch=7,
                                                                   new_isr=[1]))
        assert r.error == E.NOT_CONTROLLER
        assert c.ctx.states[("t", 0)].isr == [1, 2]               # nothing changed
    finally:
        c.stop()
        c._thread.join(5)


@pytest.mark.parametrize("broker_epoch", [-1, 0])
def test_an_isr_change_from_another_process_of_the_leader_is_refused_stale_broker_epoch(broker_epoch):
    """A broker restarted within its old ZooKeeper session's timeout is not yet registered (epoch -1) and
    may have lost its log's tail: the ISR change it asks for as the old process's leader is refused."""
    from eoslab.common.errors import E
    from eoslab.v1 import controller_pb2
    from services.controller.context import BrokerInfo, LeaderIsr
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1")
    c.active, c.epoch = True, 3
    c.ctx.brokers.update({b: BrokerInfo(b, "127.0.0.1", 1, 10 + b) for b in (1, 2)})
    c.ctx.assignments["t"] = {0: [1, 2]}
    c.ctx.states[("t", 0)] = LeaderIsr(1, 5, [1], 3, zk_version=7)
    c._thread.start()
    try:
        r = c.alter_partition(controller_pb2.AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch, topic="t",
                                                                   partition=0, leader_epoch=5, partition_epoch=7,
                                                                   new_isr=[1, 2]))
        assert r.error == E.STALE_BROKER_EPOCH
        assert c.ctx.states[("t", 0)].isr == [1]
    finally:
        c.stop()
        c._thread.join(5)
