"""compression.type as Kafka's LogValidator applies it, on the real ReplicaManager in-process and a mock
clock: under `producer` a batch is stored with the codec it was sent with; under a codec it is rebuilt
with that codec (records, timestamps, headers, producer id, epoch, sequence and transactional bit kept)
and the rebuilt batch is held to max.message.bytes; the broker's own compression.type is the default of
topics that set none. Also the codecs' writer against their reader."""
import pytest
from hypothesis import given, settings, strategies as st

from eoslab.common import compression
from eoslab.common import kafka_record_section as section
from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = [(b"k%d" % i, b"value-%d-" % i + b"x" * 300, 1_000 + i, ((b"h", b"%d" % i),)) for i in range(50)]


def kafka_batch(codec: int, records=RECORDS, **kw) -> common_pb2.RecordBatch:
    """A batch as a Kafka client sends it, compressed with `codec`."""
    body, base_ts = section.encode_records(records)
    if codec:
        body = compression.compress(codec, body)
    b = rb.batch_from_kafka(body, base_ts, len(records), max(r[2] for r in records), codec,
                            producer_id=kw.get("producer_id", rb.NO_PRODUCER_ID),
                            producer_epoch=kw.get("producer_epoch", rb.NO_PRODUCER_EPOCH),
                            base_sequence=kw.get("base_sequence", rb.NO_SEQUENCE),
                            transactional=kw.get("transactional", False))
    b.size_in_bytes = len(body) + 61
    return b


def make_rm(tmp_path, topics: dict, **defaults) -> ReplicaManager:
    meta = MetadataCache()
    update = broker_pb2.UpdateMetadataRequest(controller_epoch=1)
    for topic, configs in topics.items():
        update.topic_configs.add(topic=topic, configs=configs)
    meta.update(update)
    m = ReplicaManager(1, str(tmp_path), LogConfig(**defaults), meta, time=MockTime())
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    for topic in topics:
        req.partition_states.add(topic=topic, partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1],
                                 zk_version=0)
    assert m.become_leader_or_follower(req).error == E.NONE
    return m


def produce(rm, topic, batch):
    r = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
    r.partitions.add(topic=topic, partition=0, batch=batch)
    return rm.append_records(r).partitions[0]


def stored(rm, topic):
    resp = rm.fetch(broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=1 << 22, partitions=[
        broker_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=0, partition_max_bytes=1 << 22)]))
    return list(resp.partitions[0].batches)


@pytest.fixture
def rm(tmp_path):
    topics = {"as-sent": {}, "small": {"compression.type": "zstd", "max.message.bytes": "2000"}}
    topics.update({f"to-{name}": {"compression.type": name} for name in [*CODECS, "uncompressed"]})
    m = make_rm(tmp_path, topics)
    yield m
    m.shutdown()


@pytest.mark.parametrize("codec", [0, *CODECS.values()])
def test_under_producer_a_batch_is_stored_with_the_codec_it_was_sent_with(rm, codec):
    sent = kafka_batch(codec)
    assert produce(rm, "as-sent", sent).error == E.NONE
    [b] = stored(rm, "as-sent")
    assert rb.codec_of(b) == codec and b.records == sent.records


@pytest.mark.parametrize("target", [*CODECS, "uncompressed"])
@pytest.mark.parametrize("source", [0, 1, 3])
def test_a_batch_sent_with_another_codec_is_rebuilt_with_the_topic_s(rm, source, target):
    sent = kafka_batch(source, producer_id=7, producer_epoch=2, base_sequence=0, transactional=False)
    out = produce(rm, f"to-{target}", sent)
    assert out.error == E.NONE and out.base_offset == 0
    [b] = stored(rm, f"to-{target}")
    assert rb.codec_of(b) == CODECS.get(target, 0)
    assert rb.kafka_layout(b) and b.crc == rb.crc_of(b)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.record_count, b.max_timestamp) == \
        (7, 2, 0, 50, RECORDS[-1][2])
    assert rb.records_of(b) == RECORDS
    if target != "uncompressed":
        assert len(b.records) < len(section.encode_records(RECORDS)[0]) // 4


def test_a_transactional_batch_keeps_its_bit_when_rebuilt(tmp_path):
    m = make_rm(tmp_path, {"t": {"compression.type": "lz4"}})
    try:
        sent = kafka_batch(1, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
        assert produce(m, "t", sent).error == E.NONE
        [b] = stored(m, "t")
        assert b.attributes & rb.TRANSACTIONAL_FLAG and rb.codec_of(b) == 3
    finally:
        m.shutdown()


def test_the_lab_s_own_batch_is_rebuilt_in_kafka_s_layout_under_a_codec(rm):
    records = [(b"k", b"v" * 500, 5_000)] * 20
    assert produce(rm, "to-gzip", rb.build_batch(records)).error == E.NONE
    assert produce(rm, "to-uncompressed", rb.build_batch(records)).error == E.NONE
    [gz] = stored(rm, "to-gzip")
    assert rb.codec_of(gz) == 1 and [r[:3] for r in rb.records_of(gz)] == records
    [plain] = stored(rm, "to-uncompressed")
    assert not rb.kafka_layout(plain)          # already uncompressed: stored as sent


def test_max_message_bytes_holds_the_rebuilt_batch(rm):
    """Random bytes sent uncompressed within the topic's 2,000 bytes grow when rebuilt with zstd (a
    frame around incompressible data): MESSAGE_TOO_LARGE, as Kafka's UnifiedLog checks a batch whose
    size the validation changed; the same batch a little smaller fits."""
    import random
    data = random.Random(3).randbytes(1_990)
    for size in range(1_990, 1_800, -1):
        sent = kafka_batch(0, [(None, data[:size], 1_000, ())])
        if sent.size_in_bytes <= 2_000:
            break
    assert sent.size_in_bytes <= 2_000 < rb.recompress(sent, 4).size_in_bytes
    out = produce(rm, "small", sent)
    assert out.error == E.MESSAGE_TOO_LARGE and "recompressed" in out.error_message
    assert produce(rm, "small", kafka_batch(0, [(None, data[:size - 40], 1_000, ())])).error == E.NONE
    assert [rb.codec_of(b) for b in stored(rm, "small")] == [4]


def test_the_broker_s_compression_type_is_the_default_of_topics_that_set_none(tmp_path):
    m = make_rm(tmp_path, {"plain": {}, "own": {"compression.type": "producer"}},
                default_compression_type="snappy", compression_type="snappy")
    try:
        assert produce(m, "plain", kafka_batch(4)).error == E.NONE
        assert produce(m, "own", kafka_batch(4)).error == E.NONE
        assert rb.codec_of(stored(m, "plain")[0]) == 2
        assert rb.codec_of(stored(m, "own")[0]) == 4
    finally:
        m.shutdown()


def test_a_topic_s_compression_level_is_used():
    cfg = LogConfig().apply_topic_configs({"compression.type": "gzip", "compression.gzip.level": "1"})
    assert cfg.target_codec(0) == 1 and cfg.compression_levels == {1: 1}
    body = section.encode_records(RECORDS)[0]
    fast = rb.recompress(kafka_batch(0), 1, cfg.compression_levels[1])
    best = rb.recompress(kafka_batch(0), 1, 9)
    assert len(fast.records) > len(best.records)
    assert compression.decompress(1, fast.records[8:]) == body


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(sorted(CODECS.values())), data=st.binary(max_size=100_000),
       level=st.none() | st.integers(1, 9))
def test_every_codec_written_is_read_back(codec, data, level):
    assert compression.decompress(codec, compression.compress(codec, data, level)) == data


def test_snappy_is_framed_as_kafka_s_java_producer_frames_it():
    data = bytes(range(256)) * 300                       # 76,800 bytes: three 32 KB blocks
    out = compression.compress(2, data)
    assert out[:8] == compression.XERIAL_MAGIC and out[8:16] == b"\0\0\0\1\0\0\0\1"
    blocks, pos = 0, 16
    while pos < len(out):
        pos += 4 + int.from_bytes(out[pos:pos + 4], "big")
        blocks += 1
    assert (pos, blocks) == (len(out), 3)
