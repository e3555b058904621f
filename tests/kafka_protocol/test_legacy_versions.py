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


# -- OffsetCommit v0-v1, OffsetFetch v0, CreateTopics v0-v1, DeleteTopics v0 --------------------------------
def _old_group_and_topic_requests():
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    commit_topics = [OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
        P(partition_index=2, committed_offset=40, commit_timestamp=1_500_000_000_000, committed_metadata="meta")])]
    T = CreateTopicsRequest.CreatableTopic
    creatable = [T(name="new", num_partitions=3, replication_factor=2, assignments=[],
                   configs=[T.CreatableTopicConfig(name="cleanup.policy", value="compact")])]
    return {
        (8, 0): OffsetCommitRequest[0](group_id="g", topics=commit_topics),
        (8, 1): OffsetCommitRequest[1](group_id="g", generation_id_or_member_epoch=4, member_id="m",
                                       topics=commit_topics),
        (9, 0): OffsetFetchRequest[0](group_id="g", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[2, 5])]),
        (19, 0): CreateTopicsRequest[0](topics=creatable, timeout_ms=1500),
        (19, 1): CreateTopicsRequest[1](topics=creatable, timeout_ms=1500, validate_only=True),
        (20, 0): DeleteTopicsRequest[0](topic_names=["old", "older"], timeout_ms=1500),
    }


OLD = list(_old_group_and_topic_requests())


def _parsed(key, version):
    req = _old_group_and_topic_requests()[(key, version)]
    return codec.parse_request(_frame(req, version), {key: (0, 9)})[1]


def test_old_offset_commits_read_v1_s_generation_member_and_commit_timestamp():
    v0, v1 = _parsed(8, 0), _parsed(8, 1)
    for req in (v0, v1):
        p = req.topics[0].partitions[0]
        assert (req.group_id, req.topics[0].name, p.partition_index, p.committed_offset, p.committed_metadata) == \
            ("g", "t", 2, 40, "meta")
        assert p.committed_leader_epoch == -1 and req.group_instance_id is None
    assert (v0.generation_id_or_member_epoch, v0.member_id, v0.topics[0].partitions[0].commit_timestamp) == (-1, "", -1)
    assert (v1.generation_id_or_member_epoch, v1.member_id, v1.topics[0].partitions[0].commit_timestamp) == \
        (4, "m", 1_500_000_000_000)


def test_offset_fetch_v0_create_topics_v0_v1_and_delete_topics_v0_read_with_later_names():
    f = _parsed(9, 0)
    assert (f.group_id, f.topics[0].name, list(f.topics[0].partition_indexes), f.require_stable) == \
        ("g", "t", [2, 5], False)
    for version, validate_only in ((0, False), (1, True)):
        c = _parsed(19, version)
        t = c.topics[0]
        assert (t.name, t.num_partitions, t.replication_factor, list(t.assignments)) == ("new", 3, 2, [])
        assert [(x.name, x.value) for x in t.configs] == [("cleanup.policy", "compact")]
        assert field(c, "timeout") == 1500 and c.validate_only is validate_only     # v0 has none: false
    d = _parsed(20, 0)
    assert list(d.topic_names) == ["old", "older"] and field(d, "timeout") == 1500


@pytest.mark.parametrize("key,version", OLD)
def test_each_new_old_version_cut_short_is_malformed(key, version):
    frame = _frame(_old_group_and_topic_requests()[(key, version)], version)
    header_size = 8 + 2 + len("old-client")
    for cut in (1, 3, len(frame) - header_size):
        with pytest.raises(codec.MalformedRequest):
            codec.parse_request(frame[:-cut], {key: (0, 9)})


def test_a_null_where_the_old_version_has_no_nullable_field_is_malformed():
    """Kafka's parser refuses a -1 length for a field that is not nullable (SchemaException): OffsetFetch v0's
    group id, an element of DeleteTopics v0's names, CreateTopics v0's topic list."""
    for key, body in ((9, struct.pack(">hi", -1, 0)), (20, struct.pack(">ihi", 1, -1, 1000)),
                      (19, struct.pack(">ii", -1, 1000))):
        frame = struct.pack(">hhih", key, 0, 1, 0) + body
        with pytest.raises(codec.MalformedRequest, match="null"):
            codec.parse_request(frame, {key: (0, 9)})


def test_the_old_answers_carry_only_their_version_s_fields():
    from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsResponse
    from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse

    def back(cls, key, version, values):
        frame = legacy_versions.encode_response(key, version, 3, values)
        assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 3)
        got = cls[version].decode(frame[8:])
        assert len(frame) - 8 == len(bytes(got.encode()))            # nothing more than the version has
        return got
    commit = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [{"partition_index": 2, "error_code": 25}]}]}
    for v in (0, 1):
        assert back(OffsetCommitResponse, 8, v, commit).topics[0].partitions[0].error_code == 25
    fetch = {"error_code": 16, "topics": [{"name": "t", "partitions": [
        {"partition_index": 2, "committed_offset": 40, "committed_leader_epoch": 7, "metadata": "", "error_code": 0}]}]}
    p = back(OffsetFetchResponse, 9, 0, fetch).topics[0].partitions[0]
    assert (p.committed_offset, p.metadata, p.error_code) == (40, "", 0)
    created = {"topics": [{"name": "new", "error_code": 36, "error_message": "exists", "num_partitions": -1}]}
    assert back(CreateTopicsResponse, 19, 0, created).topics[0].error_message != "exists"  # v0 has no message
    assert back(CreateTopicsResponse, 19, 1, created).topics[0].error_message == "exists"
    deleted = {"responses": [{"name": "old", "error_code": 3, "error_message": "unknown"}]}
    assert back(DeleteTopicsResponse, 20, 0, deleted).responses[0].error_code == 3


def _real_handlers(release):
    from services.kafka_protocol import broker_apis, group_apis
    h = ApiHandlers()
    for key in (8, 9):
        h.register(key, *group_apis.VERSIONS[key], lambda header, req: {"topics": []})
    for key in (19, 20):
        h.register(key, *broker_apis.VERSIONS[key], lambda header, req: {"topics": [], "responses": []})
    h.limit_to_release(release)
    return h


def test_each_release_serves_the_old_versions_it_had_and_4_0_closes_the_connection_on_them():
    want = {"0.11": {8: (0, 3), 9: (0, 3), 19: (0, 2), 20: (0, 1)}, "2.5": {8: (0, 8), 9: (0, 7), 19: (0, 5), 20: (0, 4)},
            "3.6": {8: (0, 8), 9: (0, 8), 19: (0, 7), 20: (0, 6)}, "4.0": {8: (2, 9), 9: (1, 9), 19: (2, 7), 20: (1, 6)}}
    for release, ranges in want.items():
        assert {k: v for k, v in _real_handlers(release).served.items() if k != 18} == ranges, release
    reqs = _old_group_and_topic_requests()
    for (key, version), req in reqs.items():
        with pytest.raises(codec.MalformedRequest, match="not enabled"):    # SocketServer closes the connection
            _real_handlers("4.0")(_frame(req, version))
        out = _real_handlers("2.5")(_frame(req, version))
        assert struct.unpack_from(">ii", out) == (len(out) - 4, 7)
