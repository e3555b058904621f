"""The producer's time rules on a MockTime: linger.ms, retry.backoff.ms, request.timeout.ms,
delivery.timeout.ms, and the transactional client's coordinator-call timeout.

RecordAccumulator and Sender are built in-process and driven directly (`_run_once`, the inbox), as
Kafka's SenderTest drives its Sender on a MockTime with a MockClient: the broker connection is a fake
that records what is sent, the broker's answers are put on the Sender's inbox by the test. The rules
(Kafka's RecordAccumulator.batchReady / expiredBatches, Sender.getExpiredInflightBatches,
NetworkClient's request timeout):
- linger.ms: an open batch is not sent before linger.ms after its creation (unless full), is at it;
- retry.backoff.ms: a retried batch is not sent again before the backoff has passed, is after;
- request.timeout.ms: a request unanswered for longer than it closes its connection, and its batch is
  retried (same sequence) after the backoff; at exactly the timeout nothing happens yet;
- delivery.timeout.ms: a batch waiting or in flight for that long is failed with REQUEST_TIMED_OUT
  (ProducerBatch.hasReachedDeliveryTimeout: `deliveryTimeoutMs <= now - createdMs`); a younger one
  is not;
- a coordinator call of the transactional producer answered CONCURRENT_TRANSACTIONS is retried for
  its timeout of the clock, then raises.
No test sleeps: the clock moves only when a test moves it.
"""
import pytest

from clients.producer import sender as sender_mod
from clients.producer.config import ProducerConfig
from clients.producer.record_accumulator import RecordAccumulator
from clients.producer.sender import Sender
from clients.producer.transaction_manager import TransactionManager
from clients.producer.transactions import TransactionRequests
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, txn_pb2

pytestmark = pytest.mark.fast
LEADER = "b1:9092"


class FakeMetadata:
    """Every partition led by broker 1 at LEADER (or by nobody)."""

    def __init__(self, leader: bool = True):
        self.has_leader = leader

    def leader(self, topic, partition):
        return (1, LEADER, 0) if self.has_leader else None

    def refresh(self, topics=None):
        return None

    def stub(self, address):
        return None


class FakeConnection:
    """Stands in for BrokerConnection: records the requests; answers come from the test."""

    def __init__(self, address, stub, inbox):
        self.address, self.inbox = address, inbox
        self.in_flight: dict = {}
        self.sent: list = []
        self.closed = False

    def send(self, req):
        self.sent.append(req)

    def close(self, graceful_s: float = 0.0):
        self.closed = True


class Rig:
    def __init__(self, monkeypatch, leader=True, **cfg):
        self.time = MockTime()
        self.conns: list[FakeConnection] = []
        rig = self

        class Conn(FakeConnection):
            def __init__(self, *a):
                super().__init__(*a)
                rig.conns.append(self)
        monkeypatch.setattr(sender_mod, "BrokerConnection", Conn)
        cfg.setdefault("linger_ms", 0)
        self.config = ProducerConfig(**cfg)
        self.acc = RecordAccumulator(self.config.batch_size, self.config.linger_ms, self.config.buffer_memory,
                                     self.config.delivery_timeout_ms, self.time)
        self.tm = TransactionManager(self.config.enable_idempotence, "", self.config.version)
        self.sender = Sender(self.config, FakeMetadata(leader), self.acc, self.tm, lambda: (1000, 0),
                             time=self.time)

    def send(self, partition=0, value=b"v" * 10):
        return self.acc.append("t", partition, None, value, self.time.milliseconds(), self.sender.wake)

    def run(self):
        """One pass of the sender's loop, then whatever the inbox holds."""
        self.sender._run_once()
        self.drain()

    def drain(self):
        """The inbox's events, handled as the sender's loop does, without its idle wait (which on a
        MockTime lasts until the clock moves)."""
        for ev in self.sender.inbox.take_all(self.time, 0):
            self.sender._handle_event(ev)

    def requests(self) -> list:
        return [r for c in self.conns for r in c.sent]

    def answer(self, req, error=E.NONE, base_offset=0):
        conn = next(c for c in self.conns if req.correlation_id in c.in_flight)
        conn.inbox.put(("response", conn, broker_pb2.ProduceResponse(
            correlation_id=req.correlation_id,
            partitions=[broker_pb2.PartitionProduceResponse(topic=p.topic, partition=p.partition, error=error,
                                                            base_offset=base_offset) for p in req.partitions])))
        self.drain()


def timed_out(fut) -> bool:
    return fut.done() and isinstance(fut.exception(0), KafkaError) and fut.exception(0).code == E.REQUEST_TIMED_OUT


# -- linger.ms ----------------------------------------------------------------------------------------
def test_a_batch_is_not_ready_before_linger_and_is_at_it():
    t = MockTime()
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=100, buffer_memory=1 << 30, time=t)
    acc.append("t", 0, None, b"v", 0, lambda: None)
    ready, wait = acc.ready(t.monotonic())
    assert ready == [] and wait == pytest.approx(0.1)
    t.advance(0.099)
    ready, wait = acc.ready(t.monotonic())
    assert ready == [] and wait == pytest.approx(0.001, abs=1e-6)
    t.advance(0.001)
    assert acc.ready(t.monotonic())[0] == [("t", 0)]


def test_a_full_batch_is_ready_before_linger():
    t = MockTime()
    acc = RecordAccumulator(batch_size=20, linger_ms=100, buffer_memory=1 << 30, time=t)
    acc.append("t", 0, None, b"v" * 10, 0, lambda: None)          # 26 bytes: the batch is full
    assert acc.ready(t.monotonic())[0] == [("t", 0)]


def test_the_sender_holds_a_lingering_batch_until_linger_passes(monkeypatch):
    rig = Rig(monkeypatch, linger_ms=100, batch_size=30)
    first = rig.send()
    second = rig.send()        # does not fit: the first batch is closed, the second lingers
    rig.run()
    sent = rig.requests()
    assert len(sent) == 1 and rig.sender.in_flight_batches and rig.acc.peek(("t", 0)) is not None
    rig.answer(sent[0])
    assert first.result(0).offset == 0 and not second.done()
    rig.time.advance(0.099)
    rig.run()
    assert len(rig.requests()) == 1                                 # still lingering
    rig.time.advance(0.001)
    rig.run()
    assert len(rig.requests()) == 2 and rig.acc.peek(("t", 0)) is None


# -- retry.backoff.ms ---------------------------------------------------------------------------------
def test_a_retried_batch_is_not_ready_before_the_backoff():
    t = MockTime()
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 30, time=t)
    acc.append("t", 0, None, b"v", 0, lambda: None)
    b = acc.pop(("t", 0))
    b.retry_at = t.monotonic() + 0.1
    acc.reenqueue(b)
    ready, wait = acc.ready(t.monotonic())
    assert ready == [] and wait == pytest.approx(0.1)
    t.advance(0.101)
    assert acc.ready(t.monotonic())[0] == [("t", 0)]


def test_a_retriable_error_resends_only_after_retry_backoff(monkeypatch):
    rig = Rig(monkeypatch, retry_backoff_ms=100)
    fut = rig.send()
    rig.run()
    [req] = rig.requests()
    rig.answer(req, E.NOT_LEADER_OR_FOLLOWER)
    rig.time.advance(0.099)
    rig.run()
    assert len(rig.requests()) == 1 and not fut.done()
    rig.time.advance(0.002)
    rig.run()
    assert len(rig.requests()) == 2
    again = rig.requests()[1]
    assert again.partitions[0].batch.base_sequence == req.partitions[0].batch.base_sequence == 0
    rig.answer(again, base_offset=7)
    assert fut.result(0).offset == 7 and rig.sender.stats["retries"] == 1


# -- request.timeout.ms -------------------------------------------------------------------------------
def test_an_unanswered_request_closes_its_connection_after_request_timeout(monkeypatch):
    rig = Rig(monkeypatch, request_timeout_ms=1000, retry_backoff_ms=100)
    fut = rig.send()
    rig.run()
    conn = rig.conns[0]
    rig.time.advance(1.0)                     # Kafka: timed out when now - sent > request.timeout.ms
    rig.run()
    assert not conn.closed and rig.sender.stats["timeouts"] == 0
    rig.time.advance(0.001)
    rig.run()
    assert conn.closed and rig.sender.stats["timeouts"] == 1 and not fut.done()
    assert len(rig.requests()) == 1           # the batch waits out the backoff before its retry
    rig.time.advance(0.101)
    rig.run()
    assert len(rig.requests()) == 2 and rig.requests()[1].partitions[0].batch.base_sequence == 0


# -- delivery.timeout.ms ------------------------------------------------------------------------------
def test_a_waiting_batch_expires_after_delivery_timeout_and_a_younger_one_does_not(monkeypatch):
    rig = Rig(monkeypatch, leader=False, delivery_timeout_ms=1000)     # no leader: the batches wait
    old = rig.send(partition=0)
    rig.run()
    rig.time.advance(0.6)
    young = rig.send(partition=1)
    rig.run()
    assert not old.done() and not young.done()
    rig.time.advance(0.401)
    rig.run()
    assert timed_out(old) and not young.done()
    assert rig.acc.peek(("t", 0)) is None and rig.acc.peek(("t", 1)) is not None
    assert rig.sender.stats["failed_records"] == 1


def test_the_accumulator_expires_a_batch_at_exactly_delivery_timeout():
    # Kafka's ProducerBatch.hasReachedDeliveryTimeout: deliveryTimeoutMs <= now - createdMs
    t = MockTime()
    acc = RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 30, delivery_timeout_ms=1000, time=t)
    acc.append("t", 0, None, b"v", 0, lambda: None)
    t.advance(0.999)
    assert acc.expired_batches(t.monotonic()) == [] and acc.peek(("t", 0)) is not None
    t.advance(0.001)
    [b] = acc.expired_batches(t.monotonic())
    assert b.tp == ("t", 0) and acc.peek(("t", 0)) is None


def test_the_sender_fails_a_batch_at_exactly_delivery_timeout(monkeypatch):
    rig = Rig(monkeypatch, leader=False, delivery_timeout_ms=1000)
    fut = rig.send()
    rig.run()
    rig.time.advance(1.0)
    rig.run()
    assert timed_out(fut)


def test_an_in_flight_batch_expires_after_delivery_timeout_and_a_younger_one_does_not(monkeypatch):
    rig = Rig(monkeypatch, delivery_timeout_ms=3000, request_timeout_ms=60000)
    old = rig.send(partition=0)
    rig.run()
    rig.time.advance(2.0)
    young = rig.send(partition=1)
    rig.run()
    assert len(rig.requests()) == 2
    rig.time.advance(0.9)
    rig.run()
    assert not old.done()
    rig.time.advance(0.101)
    rig.run()
    assert timed_out(old) and not young.done()
    # the expired batch was sent: whether the log holds it is unknown until its answer comes
    assert rig.tm.has_unresolved_sequence(("t", 0)) and not rig.tm.has_unresolved_sequence(("t", 1))
    rig.answer(rig.requests()[1], base_offset=3)
    assert young.result(0).offset == 3


# -- the transactional client's coordinator calls -----------------------------------------------------
class FakeCoordinatorMetadata:
    """FindCoordinator answers coordinator c1:9094; its EndTxn answers CONCURRENT_TRANSACTIONS."""

    def __init__(self, clock, ok_after: float | None = None):
        self.clock, self.ok_after, self.end_txn_at = clock, ok_after, []
        self.channels = self

    def addresses(self):
        return ["b1:9092"]

    def stub(self, address, cls=None):
        return self

    def FindCoordinator(self, req, timeout):
        return broker_pb2.FindCoordinatorResponse(error=E.NONE, host="c1", port=9094, node_id=1)

    def EndTxn(self, req, timeout):
        self.end_txn_at.append(self.clock.monotonic())
        if len(self.end_txn_at) > 100_000:
            raise AssertionError("EndTxn retried without end")
        done = self.ok_after is not None and self.clock.monotonic() >= self.ok_after
        return txn_pb2.EndTxnResponse(error=E.NONE if done else E.CONCURRENT_TRANSACTIONS)


class FakeTransactionalProducer:
    def __init__(self, metadata, clock):
        self.config = ProducerConfig(transactional_id="tx-1")
        self.transaction_manager = TransactionManager(True, "tx-1", self.config.version)
        self.metadata, self.time = metadata, clock


def test_end_txn_answered_concurrent_transactions_is_retried_for_its_timeout_then_raises():
    clock = MockTime()
    md = FakeCoordinatorMetadata(clock)
    txn = TransactionRequests(FakeTransactionalProducer(md, clock), 30.0)
    start = clock.monotonic()
    with pytest.raises(KafkaError) as e:
        txn.end_txn(True)
    assert e.value.code == E.CONCURRENT_TRANSACTIONS
    assert len(md.end_txn_at) > 100                                  # retried, with short back-offs
    assert 29.9 <= md.end_txn_at[-1] - start <= 30.0                 # up to the timeout of the clock, not past it
    assert clock.monotonic() - start <= 30.0


def test_end_txn_goes_through_once_the_coordinator_is_done_within_the_timeout():
    clock = MockTime()
    md = FakeCoordinatorMetadata(clock, ok_after=clock.monotonic() + 2.0)
    txn = TransactionRequests(FakeTransactionalProducer(md, clock), 30.0)
    assert txn.end_txn(True).error == E.NONE
    assert 2.0 <= md.end_txn_at[-1] - md.end_txn_at[0] < 2.1
