"""message.timestamp.type=LogAppendTime as Kafka's LogValidator applies it, on the real ReplicaManager
in-process and a mock clock: the leader stamps each appended batch with its clock (max timestamp,
the timestamp-type attribute, a CRC that matches), answers the stamp in the produce response, and a
Kafka consumer reads the batch as LogAppendTime; CreateTime batches are stored as sent."""
import pytest

from eoslab.common import kafka_records as kr
from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def rm(tmp_path, clock):
    meta = MetadataCache()
    update = broker_pb2.UpdateMetadataRequest(controller_epoch=1)
    update.topic_configs.add(topic="stamped", configs={"message.timestamp.type": "LogAppendTime"})
    update.topic_configs.add(topic="plain", configs={})
    meta.update(update)
    m = ReplicaManager(1, str(tmp_path), LogConfig(), meta, time=clock)
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    for topic in ("stamped", "plain"):
        req.partition_states.add(topic=topic, partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1],
                                 zk_version=0)
    assert m.become_leader_or_follower(req).error == E.NONE
    yield m
    m.shutdown()


def produce(rm, topic, create_time):
    r = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
    r.partitions.add(topic=topic, partition=0, batch=rb.build_batch([(None, b"a", create_time),
                                                                     (None, b"b", create_time + 1)]))
    return rm.append_records(r).partitions[0]


def stored(rm, topic):
    resp = rm.fetch(broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=1 << 20, partitions=[
        broker_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]))
    return list(resp.partitions[0].batches)


def test_the_leader_stamps_a_log_append_time_batch_with_its_clock(rm, clock):
    clock.advance(5)
    now = clock.milliseconds()
    out = produce(rm, "stamped", create_time=1_000)
    assert (out.error, out.log_append_time) == (E.NONE, now)
    [b] = stored(rm, "stamped")
    assert b.max_timestamp == now and b.attributes & rb.TIMESTAMP_TYPE_FLAG
    assert b.crc == rb.crc_of(b)                                 # the CRC covers the new attributes and stamp
    [kb] = kr.decode_batches(kr.to_kafka(b))                     # what a Kafka consumer is served
    assert kb.attributes & kr.TIMESTAMP_TYPE_FLAG and kb.max_timestamp == now


def test_a_create_time_batch_is_stored_as_sent(rm, clock):
    clock.advance(5)
    out = produce(rm, "plain", create_time=1_000)
    assert (out.error, out.log_append_time) == (E.NONE, -1)
    [b] = stored(rm, "plain")
    assert b.max_timestamp == 1_001 and not b.attributes & rb.TIMESTAMP_TYPE_FLAG
