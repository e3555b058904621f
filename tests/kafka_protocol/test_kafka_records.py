"""Kafka's v2 record batches <-> the lab's batches, checked against kio's independent batch codec."""
import datetime
import gzip
import struct

import crc32c
import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch

from eoslab.common import kafka_record_section as section
from eoslab.common import kafka_records as kr
from eoslab.common import record_batch as rb
from eoslab.v1 import common_pb2

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def _kio_batch(records, headers=(), attributes=0, pid=7, epoch=1, seq=5) -> bytes:
    import io
    buf = io.BytesIO()
    recs = tuple(Record(attributes=0, offset=i, key=k, value=v, headers=tuple(headers),
                        timestamp=datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC))
                 for i, (k, v, ts) in enumerate(records))
    write_new_batch(buf, NewRecordBatch(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        attributes=attributes, records=recs))
    return buf.getvalue()


def test_a_batch_written_by_kio_becomes_the_labs_batch_with_every_field():
    data = _kio_batch([(b"k0", b"v0", 1_700_000_000_000), (None, b"v1", 1_700_000_001_000), (b"k2", None,
                                                                                             1_700_000_002_000)],
                      attributes=rb.TRANSACTIONAL_FLAG)
    [kb] = kr.decode_batches(data)
    lab = kr.to_lab(kb)
    assert (lab.producer_id, lab.producer_epoch, lab.base_sequence, lab.record_count) == (7, 1, 5, 3)
    assert lab.attributes == rb.TRANSACTIONAL_FLAG | rb.KAFKA_RECORDS_FLAG   # its records kept as they were sent
    assert lab.records[8:] == data[kr.HEADER_SIZE:]
    assert [r[:3] for r in rb.records_of(lab)] == [(b"k0", b"v0", 1_700_000_000_000), (None, b"v1", 1_700_000_001_000),
                                                   (b"k2", None, 1_700_000_002_000)]
    assert rb.validate_batch(lab, 1 << 20) is None      # the lab's own CRC is set


def test_the_labs_stored_batch_is_written_as_kafka_reads_it():
    lab = rb.build_batch([(b"a", b"1", 1_700_000_000_123), (b"b", b"2", 1_700_000_000_456)], producer_id=42,
                         producer_epoch=3, base_sequence=10, transactional=True)
    lab.base_offset, lab.partition_leader_epoch = 1000, 9
    data = kr.to_kafka(lab)
    batch, size = read_batch(data, 0)          # kio checks the CRC-32C and the lengths
    assert size == len(data)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.producer_id, batch.producer_epoch,
            batch.base_sequence, batch.last_offset_delta) == (1000, 9, 42, 3, 10, 1)
    assert batch.attributes == rb.TRANSACTIONAL_FLAG
    assert [(r.offset, r.key, r.value) for r in batch.records] == [(1000, b"a", b"1"), (1001, b"b", b"2")]
    assert batch.base_timestamp == 1_700_000_000_123 and batch.max_timestamp == 1_700_000_000_456
    again = kr.to_lab(kr.decode_batches(data)[0])
    assert [r[:3] for r in rb.records_of(again)] == list(rb.iter_records(lab.records))
    again.base_offset, again.partition_leader_epoch = 1000, 9
    assert kr.to_kafka(again) == data                    # a Kafka client's batch is served as it was sent


def test_control_batches_keep_their_flag_and_records():
    from eoslab.common.control_records import control_record
    key, value = control_record(True, 4)
    lab = rb.build_batch([(key, value, 5)], producer_id=1, producer_epoch=0, base_sequence=-1, control=True,
                         transactional=True)
    batch, _ = read_batch(kr.to_kafka(lab), 0)
    assert batch.attributes == rb.TRANSACTIONAL_FLAG | rb.CONTROL_FLAG
    assert batch.records[0].key == b"\x00\x00\x00\x01" and batch.records[0].value == value


def test_a_flipped_bit_is_corrupt_message():
    data = bytearray(_kio_batch([(b"k", b"v", 1)]))
    data[-1] ^= 1
    with pytest.raises(kr.BatchFormatError) as e:
        kr.decode_batches(bytes(data))
    assert e.value.code == E.CORRUPT_MESSAGE


def _kio_batch_per_record_headers(records) -> bytes:
    import io
    buf = io.BytesIO()
    recs = tuple(Record(attributes=0, offset=i, key=k, value=v, headers=tuple(hs),
                        timestamp=datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC))
                 for i, (k, v, ts, hs) in enumerate(records))
    write_new_batch(buf, NewRecordBatch(producer_id=7, producer_epoch=1, base_sequence=5, attributes=0,
                                        records=recs))
    return buf.getvalue()


def test_headers_are_kept_and_written_back_as_the_producer_sent_them():
    sent = [(b"k0", b"v0", 1_000, [RecordHeader(key=b"trace", value=b"abc"), RecordHeader(key=b"", value=None),
                                   RecordHeader(key=b"trace", value=b"second")]),
            (b"k1", b"v1", 1_001, []),
            (None, b"v2", 1_002, [RecordHeader(key="ключ".encode(), value=b"\x00\xff")])]
    [kb] = kr.decode_batches(_kio_batch_per_record_headers(sent))
    lab = kr.to_lab(kb)
    assert rb.validate_batch(lab, 1 << 20) is None
    expected = [((b"trace", b"abc"), (b"", None), (b"trace", b"second")), (), (("ключ".encode(), b"\x00\xff"),)]
    assert [r[3] for r in rb.records_of(lab)] == expected
    lab.base_offset, lab.partition_leader_epoch = 50, 2
    batch, _ = read_batch(kr.to_kafka(lab), 0)           # kio's reader: CRC, lengths
    assert batch.attributes == 0                          # the lab's flags never reach Kafka's wire
    assert [[(h.key, h.value) for h in r.headers] for r in batch.records] == [list(h) for h in expected]
    # a lab batch with headers (HEADERS_FLAG, the lab's layout) is written out with them too
    own = rb.batch_from_encoded(rb.encode_records([r for r in rb.records_of(lab)], True), 3, 1_002, headers=True)
    batch, _ = read_batch(kr.to_kafka(own), 0)
    assert batch.attributes == 0
    assert [[(h.key, h.value) for h in r.headers] for r in batch.records] == [list(h) for h in expected]


def test_a_batch_from_a_kafka_client_is_stored_in_its_own_layout_and_a_lab_clients_in_the_labs():
    data = _kio_batch([(b"k", b"v", 1)])
    lab = kr.to_lab(kr.decode_batches(data)[0])
    assert rb.kafka_layout(lab) and not rb.has_headers(lab)
    assert lab.records == struct.pack(">q", 1) + data[kr.HEADER_SIZE:]
    own = rb.build_batch([(b"k", b"v", 1)])
    assert not rb.kafka_layout(own) and own.records == rb.encode_records([(b"k", b"v", 1)])
    assert rb.records_of(own) == rb.records_of(lab) == [(b"k", b"v", 1, ())]


def test_a_header_key_of_negative_length_is_invalid_record():
    lab = kr.to_kafka(rb.build_batch([(b"k", b"v", 1)], producer_id=7, producer_epoch=1, base_sequence=5))
    # rewrite the record: its header count 1, then a key of length -1 (varint 1)
    [kb] = kr.decode_batches(lab)
    body = bytearray()
    rec = bytearray(b"\x00")
    section.write_varint(rec, 0)
    section.write_varint(rec, 0)
    section.write_bytes(rec, b"k")
    section.write_bytes(rec, b"v")
    section.write_varint(rec, 1)
    section.write_varint(rec, -1)
    section.write_bytes(rec, b"x")
    section.write_varint(body, len(rec))
    body += rec
    head = kr.HEADER.pack(0, kr.HEADER_SIZE - kr._LEN_OF_PREFIX + len(body), 0, 2, 0, 0, 0, kb.base_timestamp,
                          kb.max_timestamp, 7, 1, 5, 1)
    crc = crc32c.crc32c(bytes(body), crc32c.crc32c(head[kr._CRC_FROM:]))
    data = head[:17] + struct.pack(">I", crc) + head[kr._CRC_FROM:] + bytes(body)
    with pytest.raises(kr.BatchFormatError) as e:
        kr.decode_batches(data)
    assert e.value.code == E.INVALID_RECORD and "header key" in str(e.value)


def _xerial(raw_blocks: list[bytes]) -> bytes:
    """Snappy framed as Kafka's Java producer frames it (xerial's SnappyOutputStream)."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for b in raw_blocks:
        out += struct.pack(">i", len(b)) + b
    return out


def _compress(body: bytes, codec: str) -> tuple[int, bytes]:
    import cramjam
    if codec == "gzip":
        return 1, gzip.compress(body)
    if codec == "snappy-raw":                       # librdkafka
        return 2, bytes(cramjam.snappy.compress_raw(body))
    if codec == "snappy-xerial":                    # Kafka's Java producer: length-prefixed raw blocks
        half = len(body) // 2
        return 2, _xerial([bytes(cramjam.snappy.compress_raw(body[:half])),
                           bytes(cramjam.snappy.compress_raw(body[half:]))])
    if codec == "lz4":
        return 3, bytes(cramjam.lz4.compress(body))
    if codec == "zstd":
        return 4, bytes(cramjam.zstd.compress(body))
    return int(codec), body                         # a codec id flagged over an uncompressed body


def _recompress(data: bytes, codec) -> bytes:
    """The same batch with its records section compressed by `codec` (a name, or an id merely flagged)."""
    head = bytearray(data[:kr.HEADER_SIZE])
    flag, body = _compress(data[kr.HEADER_SIZE:], str(codec))
    struct.pack_into(">h", head, 21, struct.unpack_from(">h", head, 21)[0] | flag)
    struct.pack_into(">i", head, 8, kr.HEADER_SIZE - 12 + len(body))
    out = bytes(head) + body
    crc = crc32c.crc32c(out[21:])
    return out[:17] + struct.pack(">I", crc) + out[21:]


@pytest.mark.parametrize("codec", ["gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd"])
def test_every_kafka_codec_is_read(codec):
    pytest.importorskip("cramjam")
    data = _kio_batch([(b"k", b"v" * 100, 1), (b"l", b"w", 2), (None, b"x" * 3000, 3)])
    sent = _recompress(data, codec)
    [kb] = kr.decode_batches(sent)
    assert [r[1] for r in kb.records] == [b"v" * 100, b"w", b"x" * 3000]
    lab = kr.to_lab(kb)                              # stored compressed, as it was sent
    assert lab.attributes & kr.COMPRESSION_MASK == {"gzip": 1, "lz4": 3, "zstd": 4}.get(codec, 2)
    assert lab.records[8:] == sent[kr.HEADER_SIZE:] and rb.validate_batch(lab, 1 << 20) is None
    assert [r[1] for r in rb.records_of(lab)] == [b"v" * 100, b"w", b"x" * 3000]
    lab.partition_leader_epoch = 0                   # as kio wrote it (the leader sets its own)
    assert kr.to_kafka(lab) == sent                  # served as it was sent


def test_max_message_bytes_is_checked_on_the_batch_as_sent():
    records = [(b"k", b"a" * 1000, i) for i in range(40)]
    wire = _recompress(_kio_batch(records), "gzip")
    [kb] = kr.decode_batches(wire)
    lab = kr.to_lab(kb)
    assert lab.size_in_bytes == len(wire) < 2000 < 40 * 1000
    assert rb.validate_batch(lab, 2000) is None             # taken compressed, as Kafka takes it
    [plain] = kr.decode_batches(_kio_batch(records))
    assert rb.validate_batch(kr.to_lab(plain), 2000).code == E.MESSAGE_TOO_LARGE
    own = rb.build_batch(records)                            # a gRPC batch: its records and header
    assert rb.validate_batch(own, 2000).code == E.MESSAGE_TOO_LARGE


def test_a_codec_id_beyond_kafkas_is_unsupported_and_a_body_that_does_not_decompress_is_corrupt():
    data = _kio_batch([(b"k", b"v" * 100, 1)])
    with pytest.raises(kr.BatchFormatError) as e:
        kr.decode_batches(_recompress(data, 5))
    assert e.value.code == kr.UNSUPPORTED_COMPRESSION_TYPE
    for flagged in (1, 2, 3, 4):                     # flagged, but the body is not compressed
        with pytest.raises(kr.BatchFormatError) as e:
            kr.decode_batches(_recompress(data, flagged))
        assert e.value.code == E.CORRUPT_MESSAGE, flagged


@pytest.mark.parametrize("cut", [1, 10, 60, 70])
def test_truncated_bytes_never_raise_anything_but_batch_format_error(cut):
    data = _kio_batch([(b"key", b"value", 1), (b"key2", b"value2", 2)])
    with pytest.raises(kr.BatchFormatError):
        kr.decode_batches(data[:len(data) - cut])


def test_a_batch_without_producer_id_is_accepted_whatever_sequence_it_carries():
    # aiokafka's plain (non-idempotent) producer writes producer id -1 with base sequence 0; Kafka ignores both
    data = _kio_batch([(None, b"v", 1_700_000_000_000)], pid=-1, epoch=-1, seq=0)
    lab = kr.to_lab(kr.decode_batches(data)[0])
    assert (lab.producer_id, lab.producer_epoch, lab.base_sequence) == (-1, -1, -1)
    assert rb.validate_batch(lab, 1 << 20) is None


@pytest.mark.parametrize("codec", ["gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd"])
def test_a_compression_bomb_is_refused_at_the_bound_without_decompressing_it_whole(codec, monkeypatch):
    """Records that decompress past compression.MAX_DECOMPRESSED_BYTES: INVALID_RECORD (not retriable),
    while a batch just under the bound is read; a truncated gzip stream is still CORRUPT_MESSAGE."""
    pytest.importorskip("cramjam")
    from eoslab.common import compression
    data = _kio_batch([(b"k", b"\0" * 200_000, 1)])
    monkeypatch.setattr(compression.decompress, "__defaults__", (150_000,))
    with pytest.raises(kr.BatchFormatError) as e:
        kr.decode_batches(_recompress(data, codec))
    assert e.value.code == E.INVALID_RECORD and "150000 bytes" in str(e.value)
    monkeypatch.setattr(compression.decompress, "__defaults__", (250_000,))
    [kb] = kr.decode_batches(_recompress(data, codec))
    assert kb.records[0][1] == b"\0" * 200_000


def test_a_truncated_gzip_stream_is_corrupt():
    from eoslab.common import compression
    whole = gzip.compress(b"x" * 5000)
    with pytest.raises(compression.CodecError) as e:
        compression.decompress(compression.GZIP, whole[:len(whole) // 2])
    assert not isinstance(e.value, compression.TooLarge)
