import pytest

from eoslab.v1 import common_pb2
from eoslab.common import record_batch as rb

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def test_records_round_trip_with_null_keys_and_values():
    recs = [(None, b"a", 1), (b"k", None, 2), (b"", b"", 3)]
    assert list(rb.iter_records(rb.encode_records(recs))) == recs


def test_crc_covers_producer_fields_but_not_offset_or_leader_epoch():
    b = rb.build_batch([(None, b"x", 0)], producer_id=1, producer_epoch=0, base_sequence=0)
    b.base_offset, b.partition_leader_epoch = 99, 7
    assert rb.validate_batch(b, 1 << 20) is None
    b.base_sequence = 1
    assert rb.validate_batch(b, 1 << 20).code == E.CORRUPT_MESSAGE


def test_truncated_records_are_refused():
    data = rb.encode_records([(None, b"hello", 0)])
    with pytest.raises(ValueError):
        rb.count_records(data[:-2])


@pytest.mark.parametrize("field,value,code", [
    ("record_count", 2, E.INVALID_RECORD),
    ("base_sequence", -3, E.INVALID_RECORD),
    ("producer_epoch", 32768, E.INVALID_REQUEST),
    ("producer_id", -2, E.INVALID_RECORD),
    ("attributes", 1 << 7, E.INVALID_RECORD),
])
def test_malformed_fields(field, value, code):
    b = rb.build_batch([(None, b"x", 0)], producer_id=1, producer_epoch=0, base_sequence=0)
    setattr(b, field, value)
    b.crc = rb.crc_of(b)
    assert rb.validate_batch(b, 1 << 20).code == code


def test_sequence_wraps_like_kafka():
    assert rb.last_sequence(rb.MAX_SEQUENCE, 2) == 0
    assert rb.last_sequence(5, 3) == 7


def test_records_with_headers_round_trip_and_the_plain_reader_skips_them():
    recs = [(b"k", b"v", 5, [(b"h1", b"x"), (b"h2", None)]), (None, None, 6, [])]
    data = rb.encode_records(recs, with_headers=True)
    assert list(rb.iter_records_with_headers(data, True)) == [(b"k", b"v", 5, ((b"h1", b"x"), (b"h2", None))),
                                                              (None, None, 6, ())]
    assert list(rb.iter_records(data, True)) == [(b"k", b"v", 5), (None, None, 6)]
    assert rb.count_records(data, True) == 2
    with pytest.raises(ValueError):             # read as a batch without headers, the bytes do not parse
        rb.count_records(data)


@pytest.mark.parametrize("cut", [1, 3, 5, 9])
def test_a_batch_with_torn_headers_is_corrupt_message(cut):
    data = rb.encode_records([(b"k", b"v", 5, [(b"head", b"value")])], with_headers=True)
    b = rb.batch_from_encoded(data[:-cut], 1, 5, headers=True)
    assert rb.validate_batch(b, 1 << 20).code == E.CORRUPT_MESSAGE


def test_a_negative_header_count_is_refused():
    data = rb.encode_records([(b"k", b"v", 5)]) + b"\xff\xff\xff\xfe"
    with pytest.raises(ValueError, match="negative header count"):
        list(rb.iter_records_with_headers(data, True))


def test_a_compacted_topic_refuses_a_kafka_batch_s_keyless_records_by_index():
    """The append's walk of Kafka's records section (no record built) names each record without a key,
    compressed or not, as Kafka's LogValidator does for a compacted topic."""
    from eoslab.common import compression
    from eoslab.common import kafka_record_section as section
    records = [(b"k0", b"v", 1, ()), (None, b"v", 2, ()), (b"k2", None, 3, ((b"h", None),)), (None, None, 4, ())]
    body, base_ts = section.encode_records(records)
    for codec in (0, compression.LZ4):
        data = compression.compress(codec, body) if codec else body
        batch = rb.batch_from_kafka(data, base_ts, 4, 4, codec, producer_id=-1, producer_epoch=-1,
                                    base_sequence=-1, transactional=False)
        assert rb.validate_batch(batch, 1 << 20) is None
        bad = rb.validate_batch(batch, 1 << 20, compacted=True)
        assert bad.code == E.INVALID_RECORD and [i for i, _ in bad.record_errors] == [1, 3]
