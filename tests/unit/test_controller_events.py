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
