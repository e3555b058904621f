"""The transaction coordinator's housekeeping at Kafka's defaults: timed-out transactions are looked for every
10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms), expired transactional ids every hour
(transaction.remove.expired.transaction.cleanup.interval.ms), each on its own schedule; a run may set
either, or both at once with the lab's transaction.check.interval.ms. No test sleeps: the background loop
waits on a WatchedClock and the test moves it.
"""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.txn_coordinator.config import CoordinatorConfig
from services.txn_coordinator.transaction_metadata import TransactionState as S
from tests.unit.test_broker_clock_support import WatchedClock
from tests.unit.test_transaction_coordinator import coordinator

pytestmark = pytest.mark.fast
LOOP = "txn-timeouts"


def test_the_settings_default_to_kafkas_intervals():
    a = CoordinatorConfig.parse(["--coordinator-id", "1", "--listen", "h:1", "--zookeeper", "z:1", "--bootstrap", "b:1"])
    assert a.transaction_abort_timed_out_transaction_cleanup_interval_ms == 10000
    assert a.transaction_remove_expired_transaction_cleanup_interval_ms == 3600000
    assert a.transaction_check_interval_ms is None


def open_transaction(c, tid, timeout_ms):
    r = c.init_producer_id(broker_pb2.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                                             producer_id=-1, producer_epoch=-1))
    assert c.add_partitions(tid, r.producer_id, r.producer_epoch, {("a", 0)}) == E.NONE


def test_timeouts_are_looked_for_every_10_s_and_idle_ids_every_hour():
    clock = WatchedClock()
    c, tsm, _ = coordinator(time=clock, expiration_ms=1000)
    open_transaction(c, "slow", timeout_ms=1000)
    c.init_producer_id(broker_pb2.InitProducerIdRequest(transactional_id="idle", transaction_timeout_ms=60000,
                                                        producer_id=-1, producer_epoch=-1))
    c.start()
    try:
        clock.await_waiting(LOOP)
        clock.advance(9.999)                    # neither interval has passed: the loop sleeps on
        assert tsm.op.cache["slow"].state == S.ONGOING and "idle" in tsm.op.cache
        clock.step(LOOP, 0.001)                 # 10 s: the timeout rule, not the expiry rule
        assert tsm.op.cache["slow"].state != S.ONGOING
        assert "idle" in tsm.op.cache
        for _ in range(358):                    # the timeout rule's rounds, every 10 s, up to 3590 s
            clock.step(LOOP, 10)
        clock.advance(9.998)
        assert "idle" in tsm.op.cache
        clock.step(LOOP, 0.002)                 # an hour: idle ids are forgotten
        assert "idle" not in tsm.op.cache
    finally:
        c.stop()


def test_a_run_that_sets_the_interval_gets_it():
    clock = WatchedClock()
    c, tsm, _ = coordinator(time=clock, check_interval_ms=200, expiration_ms=1000)
    open_transaction(c, "slow", timeout_ms=1000)
    c.init_producer_id(broker_pb2.InitProducerIdRequest(transactional_id="idle", transaction_timeout_ms=60000,
                                                        producer_id=-1, producer_epoch=-1))
    c.start()
    try:
        for _ in range(6):
            clock.step(LOOP, 0.2)
        assert tsm.op.cache["slow"].state != S.ONGOING and "idle" not in tsm.op.cache
    finally:
        c.stop()
