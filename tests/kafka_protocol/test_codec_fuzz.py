"""Hostile bytes: the frame and batch decoders raise only their own errors, never anything else."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslab.common import kafka_records as kr
from eoslab.common import record_batch as rb
from services.kafka_protocol import codec

pytestmark = pytest.mark.fast
SERVED = {0: (0, 12), 1: (0, 12), 2: (0, 7), 3: (0, 12), 11: (0, 7), 14: (0, 5), 18: (0, 4), 22: (0, 5), 24: (0, 3), 26: (0, 5),
          28: (0, 5)}


@settings(max_examples=300, deadline=None)
@given(api=st.sampled_from(sorted(SERVED)), version=st.integers(0, 13), body=st.binary(max_size=200))
def test_any_frame_parses_or_is_refused_with_the_codecs_own_errors(api, version, body):
    frame = struct.pack(">hhi", api, version, 1) + body
    try:
        codec.parse_request(frame, SERVED)
    except (codec.MalformedRequest, codec.UnsupportedVersion):
        pass


_GOOD = kr.to_kafka(rb.build_batch([(b"key", b"value", 1_700_000_000_000), (None, b"v2", 1_700_000_000_001)],
                                   producer_id=3, producer_epoch=0, base_sequence=0))


@settings(max_examples=300, deadline=None)
@given(pos=st.integers(0, len(_GOOD) - 1), byte=st.integers(0, 255), cut=st.integers(0, len(_GOOD)))
def test_a_mutated_or_cut_batch_decodes_or_raises_batch_format_error(pos, byte, cut):
    data = bytearray(_GOOD)
    data[pos] = byte
    try:
        for kb in kr.decode_batches(bytes(data[:cut])):
            kr.to_lab(kb)
    except kr.BatchFormatError:
        pass


_SECTION = kr.to_lab(kr.decode_batches(_GOOD)[0])      # records kept as sent: the base timestamp, then Kafka's


@settings(max_examples=300, deadline=None)
@given(pos=st.integers(0, len(_SECTION.records) - 1), byte=st.integers(0, 255),
       cut=st.integers(0, len(_SECTION.records)), codec=st.integers(0, 7), count=st.integers(-1, 4))
def test_a_kafka_layout_batch_with_mutated_records_is_refused_with_a_kafka_code_never_an_exception(
        pos, byte, cut, codec, count):
    """The partition's validation is where a Kafka client's records are first read: whatever they hold,
    it answers an error code (or None for records that still read), and never raises."""
    b = rb.batch_from_kafka(b"", 0, 2, 0, 0, producer_id=3, producer_epoch=0, base_sequence=0, transactional=False)
    records = bytearray(_SECTION.records)
    records[pos] = byte
    b.records = bytes(records[:cut])
    b.attributes = (b.attributes & ~rb.COMPRESSION_MASK) | codec
    b.record_count = count if count else 2
    b.crc = rb.crc_of(b)
    err = rb.validate_batch(b, 1 << 20)
    if err is None:
        assert len(rb.records_of(b)) == b.record_count
    else:
        assert err.code in (rb.E.CORRUPT_MESSAGE, rb.E.INVALID_RECORD, kr.UNSUPPORTED_COMPRESSION_TYPE)


def test_every_served_version_has_kio_schemas_for_request_and_response():
    """Every (API, version) advertised can be read and answered with kio's schemas, or, for the versions Kafka
    4.0 removed, through legacy_versions."""
    from kio.index import load_request_schema, load_response_schema

    from services.kafka_protocol import broker_apis, coordinator_apis, group_apis, legacy_versions
    for table in (broker_apis.VERSIONS, group_apis.VERSIONS, coordinator_apis.VERSIONS):
        for key, (lo, hi) in table.items():
            for v in range(lo, hi + 1):
                if legacy_versions.is_legacy(key, v):
                    legacy_versions._classes(key)[0][v]
                    continue
                load_request_schema(key, v)
                load_response_schema(key, v)


def _outcome(fn, *args):
    from eoslab.common import kafka_record_section as section
    try:
        return "ok", fn(*args)
    except section.BatchFormatError as e:
        return "error", e.code


_RECORD = st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=300),
                    st.integers(-2 ** 40, 2 ** 40),
                    st.lists(st.tuples(st.binary(max_size=20), st.none() | st.binary(max_size=20)), max_size=3))


@settings(max_examples=400, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=80), edits=st.lists(
    st.tuples(st.integers(0, 2 ** 16), st.integers(0, 255)), max_size=3), cut=st.integers(0, 64),
    extra=st.integers(-2, 2))
def test_walking_the_records_checks_exactly_what_decoding_them_checks(records, edits, cut, extra):
    """check_records (the append's walk, which builds no record) and decode_records agree on every body,
    whole, mutated or cut, and for every count: the same error code, or success with the same keyless
    records. Timestamps span 2^41 ms so that deltas take many varint bytes."""
    from eoslab.common import kafka_record_section as section
    body, base_ts = section.encode_records([(k, v, ts, tuple(h)) for k, v, ts, h in records])
    data = bytearray(body)
    for pos, byte in edits:
        data[pos % len(data)] = byte
    data = bytes(data[:len(data) - cut]) if cut < len(data) else bytes(data)
    count = len(records) + extra
    decoded = _outcome(section.decode_records, data, count, base_ts)
    walked = _outcome(section.check_records, data, count)
    if decoded[0] == "ok":
        assert walked == ("ok", [i for i, r in enumerate(decoded[1]) if r[0] is None])
    else:
        assert walked == decoded
