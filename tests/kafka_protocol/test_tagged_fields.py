"""Unknown tagged fields in a flexible request are skipped, as Kafka's readers skip them (KIP-482); kio alone
refuses them. Known tagged fields keep their values; bytes that break the schema are still refused."""
import pytest

from services.kafka_protocol import codec
from tests.kafka_protocol.test_listener import _request

pytestmark = pytest.mark.fast
HEARTBEAT, PRODUCE, FETCH = 12, 0, 1
SERVED = {HEARTBEAT: (0, 4), PRODUCE: (3, 12), FETCH: (4, 12)}


def body(api, version, **fields) -> bytes:
    return _request(api, version, 5, **fields)[4:]       # without the size prefix


def test_an_unknown_tag_at_the_top_is_skipped():
    plain = body(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert plain[-1] == 0                                 # no tagged fields
    tagged = plain[:-1] + bytes([2, 99, 3]) + b"abc" + bytes([120, 0])
    assert codec.parse_request(tagged, SERVED)[1] == codec.parse_request(plain, SERVED)[1]


def test_an_unknown_tag_inside_a_nested_struct_is_skipped():
    plain = body(PRODUCE, 12, transactional_id=None, acks=-1, timeout=1000, topic_data=[
        {"name": "t", "partition_data": [{"index": 0, "records": b"\x01\x02"}]}])
    assert plain[-3:] == b"\x00\x00\x00"                  # partition's, topic's and the request's tags
    tagged = plain[:-3] + bytes([2, 50, 1]) + b"x" + bytes([7, 0]) + b"\x00\x00"
    assert codec.parse_request(tagged, SERVED)[1] == codec.parse_request(plain, SERVED)[1]


def test_a_known_tagged_field_keeps_its_value_beside_an_unknown_one():
    plain = body(FETCH, 12, cluster_id="lab", replica_id=-1, max_wait=500, min_bytes=1, max_bytes=1024,
                 isolation_level=0, session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[],
                 rack_id="")
    section = plain.rindex(b"lab") - 4     # the request's tagged fields: count 1, tag 0, size 4, "lab" (3 + 1)
    assert plain[section:] == bytes([1, 0, 4, 4]) + b"lab"
    extra = bytearray(plain)
    extra[section] = 2                                    # one more tagged field, after cluster_id's
    extra += bytes([9, 2]) + b"zz"
    r = codec.parse_request(bytes(extra), SERVED)[1]
    assert r.cluster_id == "lab" and r.max_bytes == 1024


def test_a_tagged_field_running_past_the_request_is_still_malformed():
    plain = body(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    with pytest.raises(codec.MalformedRequest):
        codec.parse_request(plain[:-1] + bytes([1, 99, 50]) + b"short", SERVED)
