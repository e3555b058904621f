"""Message formats v0 and v1 (eoslab.common.legacy_records), checked against kafka-python's own reader and
writer of those formats: what an old producer sends is up-converted with its keys, values, timestamps and
codec; what the lab serves to an old consumer reads back at the right offsets; bad bytes get Kafka's codes."""
import struct
import zlib

import pytest

from eoslab.common import compression, legacy_records as lr, record_batch as rb, record_filter as rf
from eoslab.common.kafka_record_section import BatchFormatError, UNSUPPORTED_COMPRESSION_TYPE
from eoslab.v1 import common_pb2

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode
kafka_record = pytest.importorskip("kafka.record")
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

CODECS = [0, compression.GZIP, compression.SNAPPY, compression.LZ4]


def _old_producer_set(magic, codec, records, base=0):
    """A message set as kafka-python's legacy builder writes it (one wrapper when compressed)."""
    bld = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(records):
        bld.append(base + i, timestamp=ts if magic else None, key=k, value=v)
    return bytes(bld.build())


def _read_with_kafka_python(data):
    """(offset, key, value, timestamp, timestamp type) of every record, as an old consumer reads them."""
    out, mr = [], MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        out += [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type) for r in batch]
    return out


RECORDS = [(b"k%d" % i, b"value-%d" % i * 3, 1_700_000_000_000 + i) for i in range(7)] + [(None, b"nokey", 1_700_000_000_100),
                                                                                       (b"tomb", None, 1_700_000_000_101)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_an_old_producer_s_messages_are_up_converted_with_keys_values_timestamps_and_codec(magic, codec):
    data = _old_producer_set(magic, codec, RECORDS)
    ms = lr.decode_message_set(data)
    assert (ms.magic, ms.codec) == (magic, codec)
    b = lr.to_lab(ms)
    assert b.producer_id == rb.NO_PRODUCER_ID and b.base_sequence == rb.NO_SEQUENCE
    assert rb.codec_of(b) == codec and b.record_count == len(RECORDS)
    want_ts = [ts if magic else -1 for _, _, ts in RECORDS]
    assert [(k, v, ts) for k, v, ts, *_ in rb.records_of(b)] == [(k, v, t) for (k, v, _), t in zip(RECORDS, want_ts)]
    assert b.max_timestamp == max(want_ts)
    assert b.size_in_bytes == ms.largest == (len(data) if codec else max(_shallow_sizes(data)))


def _shallow_sizes(data):
    pos, out = 0, []
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append(size)
        pos += size
    return out


def test_the_size_checked_is_the_largest_message_as_sent():
    small, big = (b"a", b"x", 1), (b"b", b"y" * 5000, 2)
    data = _old_producer_set(1, 0, [small, big, small])
    # offset and size, CRC, magic, attributes, timestamp, key length and key, value length and value
    assert lr.decode_message_set(data).largest == 12 + 4 + 1 + 1 + 8 + 4 + 1 + 4 + 5000


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_served_batches_read_back_at_their_own_offsets_in_an_old_consumer(magic, codec):
    first = rb.recompress(rb.build_batch([(k, v, ts) for k, v, ts in RECORDS]), codec)
    first.base_offset = 40
    second = rb.recompress(rb.build_batch([(b"a", b"1", 5), (b"b", b"2", 6), (b"c", b"3", 7), (b"d", b"4", 8)]), codec)
    second.base_offset = 49
    # the cleaner kept the 2nd and 4th record of the second batch: offsets 50 and 52, a gap at 51
    kept = rb.records_with_offsets(second)
    sparse = rf.filtered_batch(second, [kept[1], kept[3]])
    got = _read_with_kafka_python(lr.encode_message_set([first, sparse], magic))
    want = [(40 + i, k, v, ts if magic else None) for i, (k, v, ts) in enumerate(RECORDS)] + \
           [(50, b"b", b"2", 6 if magic else None), (52, b"d", b"4", 8 if magic else None)]
    assert [(o, k, v, ts) for o, k, v, ts, _ in got] == want


def test_control_batches_are_left_out_and_log_append_time_gives_the_batch_s_time():
    data = rb.build_batch([(b"k", b"v", 10), (b"k2", b"v2", 11)])
    data.base_offset = 7
    data.attributes |= rb.TIMESTAMP_TYPE_FLAG
    data.max_timestamp = 99_999
    marker = rb.build_batch([(b"\0\0\0\0", b"\0\0\0\0\0\0", 12)], control=True)
    marker.base_offset = 9
    got = _read_with_kafka_python(lr.encode_message_set([data, marker], 1))
    assert [(o, ts, tt) for o, _, _, ts, tt in got] == [(7, 99_999, 1), (8, 99_999, 1)]
    assert lr.encode_message_set([marker], 0) == b""


def test_lz4_in_magic_0_carries_the_header_checksum_old_kafka_wrote_and_is_read_with_it():
    """kafka-python's lz4 codec for 0.8/0.9 brokers writes and expects KAFKA-3160's checksum; magic 1 a correct one."""
    old = _old_producer_set(0, compression.LZ4, RECORDS)
    assert [m.value for m in lr.decode_message_set(old).messages] == [v for _, v, _ in RECORDS]
    b = rb.recompress(rb.build_batch(RECORDS), compression.LZ4)
    for magic, broken in ((0, True), (1, False)):
        served = lr.encode_message_set([b], magic)
        frame = lr.decode_message_set(served, limit=1 << 20)   # our reader: the checksum as written
        assert [m.value for m in frame.messages] == [v for _, v, _ in RECORDS]
        wrapper_value = served[12 + 4 + 2 + (8 if magic else 0) + 4:][4:]
        assert wrapper_value[6] == lr.lz4_header_checksum(wrapper_value, broken)
        assert lr.lz4_header_checksum(wrapper_value, True) != lr.lz4_header_checksum(wrapper_value, False)


def test_zstd_cannot_be_down_converted():
    z = rb.recompress(rb.build_batch([(b"k", b"v", 1)]), compression.ZSTD)
    assert not lr.can_down_convert(z)
    assert lr.can_down_convert(rb.recompress(rb.build_batch([(b"k", b"v", 1)]), compression.LZ4))


def _flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]


def _message(offset, magic, attributes, value, key=None, ts=0):
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", ts) if magic else b"")
    body += (struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key)
    body += struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("bad, code", [
    (lambda d: _flip(d, len(d) - 1), E.CORRUPT_MESSAGE),                  # a value byte: the CRC no longer matches
    (lambda d: d[:-3], E.CORRUPT_MESSAGE),                                  # truncated
    (lambda d: d + b"\0\0\0", E.CORRUPT_MESSAGE),                           # trailing bytes
    (lambda d: d[:16] + b"\x02" + d[17:], E.CORRUPT_MESSAGE),               # magic 2 where 0/1 belongs
    (lambda d: d + _message(5, 0, 0, b"x"), E.INVALID_RECORD),              # two magics in one set
    (lambda d: d + _message(5, 1, compression.GZIP, compression.compress(compression.GZIP, d)), E.INVALID_RECORD),
    (lambda d: _message(0, 1, compression.GZIP, compression.compress(
        compression.GZIP, _message(0, 1, compression.GZIP, compression.compress(compression.GZIP, d)))),
     E.INVALID_RECORD),                                                     # compressed inside compressed
    (lambda d: _message(0, 1, 4, b"zstd is v2 only"), UNSUPPORTED_COMPRESSION_TYPE),
    (lambda d: _message(0, 1, compression.GZIP, b"not gzip"), E.CORRUPT_MESSAGE),
    (lambda d: b"", E.CORRUPT_MESSAGE),
])
def test_bad_message_sets_get_kafka_s_codes(bad, code):
    data = bad(_old_producer_set(1, 0, RECORDS[:3]))
    with pytest.raises(BatchFormatError) as e:
        lr.decode_message_set(data)
    assert e.value.code == code


def test_a_wrapper_that_inflates_past_the_limit_is_refused_before_it_is_held():
    bomb = _message(0, 1, compression.GZIP, compression.compress(compression.GZIP, b"\0" * (4 << 20)))
    with pytest.raises(BatchFormatError) as e:
        lr.decode_message_set(bomb, limit=1 << 20)
    assert e.value.code == E.MESSAGE_TOO_LARGE
