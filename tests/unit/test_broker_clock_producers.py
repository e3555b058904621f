"""Producer id expiry on a mock clock: Kafka's producer.id.expiration.ms (ProducerStateManager's
removeExpiredProducers / isProducerExpired) and producer.id.expiration.check.interval.ms.

Guarantees checked: a producer idle for the expiration or longer, with no open transaction, is
forgotten, and one that wrote within it is kept; an open transaction keeps its producer however
long it stays open, and the marker that ends it starts the idle time again (it sets Kafka's
lastTimestamp, as a batch does); once forgotten, a late retry of the
producer's last batch is no longer recognised as a duplicate; the broker looks for expired
producers once per check interval of its clock. No test sleeps: each moves a MockTime.
"""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.log import StoredBatch, UnifiedLog
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.producer_state import ProducerStateManager
from services.broker.replica_manager import ReplicaManager
from eoslab.common.control_records import control_record
from tests.unit.test_broker_clock_support import WatchedClock

pytestmark = pytest.mark.fast
EXPIRATION_MS = 10_000
EXPIRATION_S = EXPIRATION_MS / 1000
MS = 0.001


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def state(tmp_path, clock):
    return UnifiedLog(str(tmp_path)), ProducerStateManager(str(tmp_path), time=clock)


def write(state, pid, seq, epoch=0, transactional=False, control=False, records=None):
    log, psm = state
    b = StoredBatch.from_proto(rb.build_batch(records or [(None, b"x", 0)], producer_id=pid, producer_epoch=epoch,
                                              base_sequence=seq, transactional=transactional, control=control))
    b.base_offset = log.log_end_offset
    log.append(b)
    psm.update(b)


def commit(state, pid, epoch=0):
    key, value = control_record(True, 0)
    write(state, pid, rb.NO_SEQUENCE, epoch, transactional=True, control=True, records=[(key, value, 0)])


def expire(state):
    return state[1].remove_expired_producers(EXPIRATION_MS)


def test_an_idle_producer_is_forgotten_and_one_that_wrote_within_the_expiration_is_kept(state, clock):
    write(state, 7, 0)
    write(state, 8, 0)
    clock.advance(6.0)
    write(state, 8, 1)                                 # 8 writes again: its idle time starts again
    clock.advance(EXPIRATION_S - 6.0 - MS)
    assert expire(state) == []
    clock.advance(2 * MS)
    assert expire(state) == [7]
    assert state[1].last_entry(8) is not None
    clock.advance(6.0 - 2 * MS)
    assert expire(state) == []                         # 8 has been idle 10 s less 1 ms
    clock.advance(2 * MS)
    assert expire(state) == [8]


def test_a_producer_idle_for_exactly_the_expiration_is_forgotten(state, clock):
    """Kafka's isProducerExpired: currentTimeMs - lastTimestamp >= producerIdExpirationMs."""
    write(state, 7, 0)
    clock.advance(EXPIRATION_S)
    assert expire(state) == [7]


def test_an_open_transaction_keeps_its_producer_and_its_marker_starts_the_idle_time(state, clock):
    write(state, 9, 0, transactional=True)
    clock.advance(86400.0)                             # open for a day
    assert expire(state) == []
    commit(state, 9)
    clock.advance(EXPIRATION_S - MS)
    assert expire(state) == []                         # idle since the marker, not since its batch
    clock.advance(MS)
    assert expire(state) == [9]


def test_a_late_retry_after_expiry_is_not_recognised_as_a_duplicate(tmp_path, clock):
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=LogConfig(producer_id_expiration_ms=EXPIRATION_MS),
                  time=clock)
    p.make_leader(0, [1], [1], 0)
    try:
        batch = rb.build_batch([(None, b"x", 0)], producer_id=7, producer_epoch=0, base_sequence=0)
        assert p.append_records_to_leader(batch, acks=1).base_offset == 0
        clock.advance(EXPIRATION_S - MS)
        assert p.remove_expired_producers() == []
        retry = p.append_records_to_leader(batch, acks=1)
        assert retry.duplicate and retry.base_offset == 0
        clock.advance(EXPIRATION_S)
        assert p.remove_expired_producers() == [7]
        late = p.append_records_to_leader(batch, acks=1)
        assert not late.duplicate and late.base_offset == 1     # written twice, as in Kafka
    finally:
        p.close()


def test_the_broker_forgets_expired_producers_once_per_check_interval(tmp_path):
    clock = WatchedClock()
    rm = ReplicaManager(1, str(tmp_path), LogConfig(producer_id_expiration_ms=EXPIRATION_MS,
                                                    producer_id_expiration_check_ms=60_000), MetadataCache(),
                        time=clock)
    try:
        req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
        req.partition_states.add(topic="t", partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1],
                                 zk_version=0)
        assert rm.become_leader_or_follower(req).error == E.NONE
        produce = broker_pb2.ProduceRequest(acks=1)
        produce.partitions.add(topic="t", partition=0, batch=rb.build_batch(
            [(None, b"x", 0)], producer_id=7, producer_epoch=0, base_sequence=0))
        assert rm.append_records(produce).partitions[0].error == E.NONE
        p = rm.get_partition("t", 0)
        clock.step("isr-maintenance", 30.0)
        assert p.producer_state.last_entry(7) is not None   # idle 30 s, but the next check is at 60 s
        clock.step("isr-maintenance", 30.0)
        assert p.producer_state.last_entry(7) is None
    finally:
        rm.shutdown()
