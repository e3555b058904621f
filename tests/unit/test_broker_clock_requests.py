"""Request-path waits on a mock clock: the long-poll fetch (Kafka's fetch.max.wait.ms, DelayedFetch),
the acks=all produce (request timeout, DelayedProduce) and the producer-id block request's retry bound.

Guarantees checked: a long poll with nothing to read ends at its max wait of the broker's clock,
not before, and never later than MAX_FETCH_WAIT_MS; data ends it at once; an acks=all produce the
ISR does not replicate is answered REQUEST_TIMED_OUT at its timeout (at most MAX_PRODUCE_WAIT_MS),
and NONE as soon as the follower has it; with no controller to answer, InitProducerId gives up
with COORDINATOR_LOAD_IN_PROGRESS after its timeout, backing off on the clock. No test sleeps:
requests wait in threads on a WatchedClock, and the test moves it.
"""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.common.producer_id_manager import ProducerIdManager
from services.broker.replica_manager import MAX_FETCH_WAIT_MS, MAX_PRODUCE_WAIT_MS, ReplicaManager
from tests.unit.test_broker_clock_support import REAL_TIMEOUT_S, WatchedClock, start

pytestmark = pytest.mark.fast
MS = 0.001


@pytest.fixture
def clock():
    return WatchedClock()


@pytest.fixture
def rm(tmp_path, clock):
    m = ReplicaManager(1, str(tmp_path), LogConfig(), MetadataCache(), time=clock)
    yield m
    m.shutdown()


def lead(rm, isr):
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic="t", partition=0, leader=1, leader_epoch=0, isr=isr, replicas=[1, 2],
                             zk_version=0)
    assert rm.become_leader_or_follower(req).error == E.NONE


def fetch(rm, replica_id, offset, max_wait_ms):
    return rm.fetch(broker_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, partitions=[
        broker_pb2.FetchPartition(topic="t", partition=0, fetch_offset=offset)])).partitions[0]


def produce(rm, acks, timeout_ms=1000):
    req = broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    req.partitions.add(topic="t", partition=0, batch=rb.build_batch([(None, b"x", 0)]))
    return rm.append_records(req).partitions[0]


def result(call):
    t, out = call
    t.join(REAL_TIMEOUT_S)
    assert not t.is_alive(), "the request was not answered"
    assert "error" not in out, out.get("error")
    return out["result"]


def still_waiting(call):
    call[0].join(0.1)
    assert call[0].is_alive()


@pytest.mark.parametrize("max_wait_ms,waits_s", [(500, 0.5), (10 ** 9, MAX_FETCH_WAIT_MS / 1000)])
def test_a_long_poll_with_nothing_to_read_ends_at_its_max_wait(rm, clock, max_wait_ms, waits_s):
    lead(rm, isr=[1])
    poll = start("poll", lambda: fetch(rm, -1, 0, max_wait_ms))
    clock.await_waiting("poll")
    clock.advance(waits_s - MS)
    still_waiting(poll)
    clock.advance(2 * MS)
    r = result(poll)
    assert r.error == E.NONE and not r.batches
    assert not rm._all_parked


def test_a_long_poll_ends_as_soon_as_there_is_data(rm, clock):
    lead(rm, isr=[1])
    poll = start("poll", lambda: fetch(rm, -1, 0, 500))
    clock.await_waiting("poll")
    clock.advance(0.25)
    assert produce(rm, acks=1).error == E.NONE           # the high watermark moves: the poll reads it
    assert len(result(poll).batches) == 1


@pytest.mark.parametrize("timeout_ms,waits_s", [(1000, 1.0), (10 ** 7, MAX_PRODUCE_WAIT_MS / 1000)])
def test_an_unreplicated_acks_all_produce_times_out_at_its_timeout(rm, clock, timeout_ms, waits_s):
    lead(rm, isr=[1, 2])                                 # follower 2 never fetches
    call = start("produce", lambda: produce(rm, acks=-1, timeout_ms=timeout_ms))
    clock.await_waiting("produce")
    clock.advance(waits_s - MS)
    still_waiting(call)
    clock.advance(2 * MS)
    assert result(call).error == E.REQUEST_TIMED_OUT


def test_an_acks_all_produce_is_answered_once_the_follower_has_it(rm, clock):
    lead(rm, isr=[1, 2])
    call = start("produce", lambda: produce(rm, acks=-1))
    clock.await_waiting("produce")
    clock.advance(0.5)
    still_waiting(call)
    assert fetch(rm, 2, 1, 0).error == E.NONE            # the follower is at 1: the high watermark is 1
    r = result(call)
    assert (r.error, r.base_offset) == (E.NONE, 0)


def test_producer_ids_are_given_up_after_the_timeout_when_no_controller_answers():
    clock = MockTime()
    m = ProducerIdManager(1, controller_address=lambda: None, broker_epoch=lambda: 0, timeout_s=10.0, time=clock)
    start_s = clock.monotonic()
    assert m.generate_producer_id() == (E.COORDINATOR_LOAD_IN_PROGRESS, -1)
    assert 10.0 <= clock.monotonic() - start_s < 10.5    # slept on the clock, backing off up to 0.5 s
