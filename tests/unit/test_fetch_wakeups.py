"""Long polls wake only for their own partitions and for what they read: a follower's fetch for a log
end that moved, a consumer's for a high watermark that moved. On the real ReplicaManager and Partition,
in-process; reads of each partition are counted by wrapping Partition.read."""
import threading
import time

import pytest

from eoslab.v1 import broker_pb2, common_pb2
from eoslab.common import record_batch as rb
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


@pytest.fixture
def rm(tmp_path):
    m = ReplicaManager(1, str(tmp_path), LogConfig(), MetadataCache())
    yield m
    m.shutdown()


@pytest.fixture
def reads(monkeypatch):
    """Partition.read calls per partition index, and per (partition index, thread)."""
    counts: dict = {}
    real = Partition.read

    def counted(self, *a, **kw):
        for key in (self.partition, (self.partition, threading.get_ident())):
            counts[key] = counts.get(key, 0) + 1
        return real(self, *a, **kw)
    monkeypatch.setattr(Partition, "read", counted)
    return counts


def lead(rm, isr, replicas=(1, 2)):
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    for p in (0, 1):
        req.partition_states.add(topic="t", partition=p, leader=1, leader_epoch=0, isr=isr,
                                 replicas=list(replicas), zk_version=0)
    assert rm.become_leader_or_follower(req).error == E.NONE


def produce(rm, partition):
    req = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
    req.partitions.add(topic="t", partition=partition, batch=rb.build_batch([(None, b"x", 0)]))
    assert rm.append_records(req).partitions[0].error == E.NONE


def fetch(rm, replica_id, offset, partition=0, max_wait_ms=5000):
    return rm.fetch(broker_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, partitions=[
        broker_pb2.FetchPartition(topic="t", partition=partition, fetch_offset=offset)]))


def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn()))
    t.start()
    return t, out


def wait_parked(rm, n=1):
    deadline = time.monotonic() + 5
    while len(rm._all_parked) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(rm._all_parked) == n


def test_a_followers_poll_sleeps_through_other_partitions_and_wakes_for_its_own(rm, reads):
    lead(rm, isr=[1])
    t, out = in_thread(lambda: fetch(rm, replica_id=2, offset=0))
    wait_parked(rm)
    first = reads.get(0, 0)
    for _ in range(20):
        produce(rm, 1)                    # another partition's log end and high watermark move
    time.sleep(0.1)
    assert reads.get(0, 0) == first       # never re-read
    t0 = time.monotonic()
    produce(rm, 0)
    t.join(2)
    assert time.monotonic() - t0 < 1.0
    assert len(out["r"].partitions[0].batches) == 1


def test_a_consumers_poll_sleeps_through_an_append_below_the_isr_and_wakes_with_the_high_watermark(rm, reads):
    lead(rm, isr=[1, 2])                  # the follower has nothing: an append does not move the HW
    t, out = in_thread(lambda: fetch(rm, replica_id=-1, offset=0))
    wait_parked(rm)
    first = reads.get(0, 0)
    produce(rm, 0)
    time.sleep(0.1)
    assert reads.get(0, 0) == first       # the log end moved, the high watermark did not
    assert t.is_alive()
    follower = fetch(rm, replica_id=2, offset=1, max_wait_ms=0)   # the follower has it: HW 1
    assert follower.partitions[0].error == E.NONE
    t.join(2)
    assert not t.is_alive()
    assert out["r"].partitions[0].high_watermark == 1
    assert len(out["r"].partitions[0].batches) == 1
    assert not rm._all_parked and rm.parked_client_fetches == 0


def test_a_followers_poll_is_not_woken_by_the_high_watermark(rm, reads):
    lead(rm, isr=[1, 2, 3], replicas=(1, 2, 3))
    produce(rm, 0)
    assert fetch(rm, replica_id=2, offset=0, max_wait_ms=0).partitions[0].batches
    t, out = in_thread(lambda: fetch(rm, replica_id=2, offset=1, max_wait_ms=600))
    wait_parked(rm)
    assert rm.get_partition("t", 0).high_watermark == 0      # follower 3 has nothing yet
    assert fetch(rm, replica_id=3, offset=0, max_wait_ms=0).partitions[0].batches
    assert fetch(rm, replica_id=3, offset=1, max_wait_ms=0).partitions[0].error == E.NONE
    assert rm.get_partition("t", 0).high_watermark == 1      # moved while follower 2 waits
    t.join(2)
    assert reads[(0, t.ident)] == 2       # its first read and the one that answers at its max_wait, no other
    assert not out["r"].partitions[0].batches
