"""The request versions Kafka 4.0 removed (services.kafka_protocol.legacy_versions): read from a client's frame
with kio's field names, answered in the version asked, served to releases before 4.0 and refused on 4.0 as
Kafka's SocketServer refuses a version it does not enable."""
import struct

import pytest

from services.kafka_protocol import codec, legacy_versions
from services.kafka_protocol.apis import ApiHandlers, field

pytestmark = pytest.mark.fast
pytest.importorskip("kafka.protocol.producer")
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, ListOffsetsResponse  # noqa: E402
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402


def _frame(req, version, corr=7, client_id="old-client"):
    body = bytes(req.encode())
    cid = client_id.encode()
    return struct.pack(">hhih", req.API_KEY, version, corr, len(cid)) + cid + body


def _produce(version):
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=b"message-set")
    return ProduceRequest[version](acks=-1, timeout_ms=1500,
                                   topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[part])])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_an_old_produce_is_read_with_the_names_later_versions_have(version):
    header, req = codec.parse_request(_frame(_produce(version), version), {0: (0, 9)})
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (0, version, 7, "old-client")
    assert req.transactional_id is None and int(req.acks) == -1 and field(req, "timeout") == 1500
    pd = req.topic_data[0].partition_data[0]
    assert (req.topic_data[0].name, pd.index, bytes(pd.records)) == ("t", 3, b"message-set")


def test_an_old_fetch_reads_defaults_for_the_fields_it_lacks():
    part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1000)
    req = FetchRequest[1](replica_id=-1, max_wait_ms=250, min_bytes=1,
                          topics=[FetchRequest.FetchTopic(topic="t", partitions=[part])])
    _, got = codec.parse_request(_frame(req, 1), {1: (0, 12)})
    assert field(got, "max_wait") == 250 and int(got.isolation_level) == 0 and int(got.max_bytes) == 0x7FFFFFFF
    p = got.topics[0].partitions[0]
    assert (got.topics[0].topic, p.partition, p.fetch_offset, p.current_leader_epoch) == ("t", 0, 42, -1)


def test_a_truncated_old_request_is_malformed_not_a_crash():
    frame = _frame(_produce(2), 2)
    with pytest.raises(codec.MalformedRequest):
        codec.parse_request(frame[:-4], {0: (0, 9)})


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_answer_is_written_in_the_version_asked_and_later_fields_left_out(version):
    values = {"responses": [{"name": "t", "partition_responses": [
        {"index": 3, "error_code": 0, "base_offset": 41, "log_append_time_ms": 1234, "log_start_offset": 5,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    frame = legacy_versions.encode_response(0, version, 99, values)
    size, corr = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and corr == 99
    back = ProduceResponse[version].decode(frame[8:])
    p = back.responses[0].partition_responses[0]
    assert (p.index, p.error_code, p.base_offset) == (3, 0, 41)
    assert p.log_append_time_ms == (1234 if version == 2 else -1)
    assert len(frame) - 8 == len(bytes(ProduceResponse[version](responses=back.responses).encode()))


def test_list_offsets_v0_answers_the_old_offset_list():
    values = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0,
                                                       "old_style_offsets": [30, 10, 0]}]}]}
    back = ListOffsetsResponse[0].decode(legacy_versions.encode_response(2, 0, 1, values)[8:])
    assert back.topics[0].partitions[0].old_style_offsets == [30, 10, 0]
    req = ListOffsetsRequest[0](replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1, max_num_offsets=1)])])
    _, got = codec.parse_request(_frame(req, 0), {2: (0, 7)})
    assert got.topics[0].partitions[0].max_num_offsets == 1 and got.topics[0].partitions[0].timestamp == -1


def _handlers(release):
    h = ApiHandlers()
    h.register(0, 0, 12, lambda header, req: {"responses": [], "throttle_time_ms": 0})
    h.limit_to_release(release)
    return h


def test_4_0_closes_the_connection_on_produce_v2_and_3_6_answers_it():
    frame = _frame(_produce(2), 2)
    with pytest.raises(codec.MalformedRequest):           # SocketServer: a version not enabled closes
        _handlers("4.0")(frame)
    out = _handlers("3.6")(frame)
    assert struct.unpack_from(">i", out, 4)[0] == 7
    assert ProduceResponse[2].decode(out[8:]).responses == []


def test_describe_configs_v0_says_is_default_and_the_acl_apis_v0_read_literal_patterns():
    from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest, DescribeConfigsResponse
    values = {"throttle_time_ms": 0, "results": [{
        "error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.ms", "value": "1000", "read_only": False, "config_source": 1, "is_default": False,
             "is_sensitive": False, "synonyms": [], "config_type": 5, "documentation": None}]}]}
    c = DescribeConfigsResponse[0].decode(legacy_versions.encode_response(32, 0, 1, values)[8:]).results[0].configs[0]
    assert (c.name, c.value, c.is_default) == ("retention.ms", "1000", False)
    req = DescribeAclsRequest[0](resource_type_filter=2, resource_name_filter="t", principal_filter=None,
                                 host_filter=None, operation=1, permission_type=1)
    _, got = codec.parse_request(_frame(req, 0), {29: (0, 3)})
    assert int(got.pattern_type_filter) == 3 and got.resource_name_filter == "t"     # v0: LITERAL only
    creation = CreateAclsRequest.fields["creations"].data_class(
        version=0, resource_type=2, resource_name="t", principal="User:a", host="*", operation=3, permission_type=3)
    _, got = codec.parse_request(_frame(CreateAclsRequest[0](creations=[creation]), 0), {30: (0, 3)})
    assert int(got.creations[0].resource_pattern_type) == 3 and got.creations[0].principal == "User:a"


def test_0_11_serves_the_acl_apis_and_describe_configs_at_v0_and_4_0_from_v1():
    from services.kafka_protocol import acl_apis, config_apis
    for release, lowest in (("0.11", 0), ("2.5", 0), ("4.0", 1)):
        h = ApiHandlers()
        for key in (29, 30, 31):
            h.register(key, *acl_apis.VERSIONS[key], None)
        h.register(32, *config_apis.VERSIONS[32], None)
        h.limit_to_release(release)
        assert {k: lo for k, (lo, _) in h.served.items() if k != 18} == {29: lowest, 30: lowest, 31: lowest, 32: lowest}
    assert h.served[32] == (1, 4)
