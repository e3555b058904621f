"""A fetch's byte limits as Kafka's ReplicaManager.readFromLog applies them, on the real ReplicaManager
in-process: whole batches within the response's max_bytes and each partition's partition_max_bytes;
only the first partition that gives anything may exceed them (one batch, so a consumer never stalls
on a batch larger than its limits); after it, a partition that has no room gets nothing."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode
VALUE = b"x" * 1000


@pytest.fixture
def rm(tmp_path):
    m = ReplicaManager(1, str(tmp_path), LogConfig(), MetadataCache())
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    for p in (0, 1, 2):
        req.partition_states.add(topic="t", partition=p, leader=1, leader_epoch=0, isr=[1], replicas=[1],
                                 zk_version=0)
    assert m.become_leader_or_follower(req).error == E.NONE
    for p in (0, 1, 2):
        for _ in range(3):       # three batches of about 1 KB on each partition
            r = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
            r.partitions.add(topic="t", partition=p, batch=rb.build_batch([(None, VALUE, 0)]))
            assert m.append_records(r).partitions[0].error == E.NONE
    yield m
    m.shutdown()


def fetched(rm, max_bytes, partition_max_bytes):
    resp = rm.fetch(broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=max_bytes, partitions=[
        broker_pb2.FetchPartition(topic="t", partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes)
        for p in (0, 1, 2)]))
    return [len(p.batches) for p in resp.partitions]


def test_batches_fit_the_response_limit_and_only_the_first_may_exceed_it(rm):
    assert fetched(rm, 1 << 20, 1 << 20) == [3, 3, 3]
    assert fetched(rm, 2500, 1 << 20) == [2, 0, 0]       # 2 KB fit; no partition after that gets one
    assert fetched(rm, 100, 1 << 20) == [1, 0, 0]        # too small for one: the first partition's first
    assert fetched(rm, 1 << 20, 100) == [1, 0, 0]        # the same for the per-partition limit


def test_each_partition_keeps_to_its_own_limit(rm):
    assert fetched(rm, 1 << 20, 2500) == [2, 2, 2]
    assert fetched(rm, 5500, 2500) == [2, 2, 1]          # 1 KB of the response's limit left for the third
