"""OffsetCommit v0 / OffsetFetch v0 keep offsets in ZooKeeper, as ZooKeeper-mode Kafka does, and v1 goes to the
group coordinator (services.kafka_protocol.zk_offsets, group_apis): whole frames through ApiHandlers on a 2.5
listener, a real GroupCoordinator leading __consumer_offsets-0 and a stand-in for ZooKeeper.

Kafka's source: KafkaApis.handleOffsetCommitRequest ("for version 0 always store offsets to ZK") and the
v0 branch of handleOffsetFetchRequest, KafkaZkClient.setOrCreateConsumerOffset / getConsumerOffset."""
import struct
from types import SimpleNamespace

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.broker_service import BrokerService
from services.broker.group_coordinator import GroupCoordinator
from services.kafka_protocol import zk_offsets
from services.kafka_protocol.apis import ApiHandlers
from services.kafka_protocol.group_apis import register_group_apis
from tests.helpers import offsets_leader

pytestmark = pytest.mark.fast
pytest.importorskip("kafka.protocol.consumer")
from kafka.protocol.consumer import (OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,  # noqa: E402
                                     OffsetFetchResponse)

OFFSETS = "__consumer_offsets"
PATH = "/consumers/old-group/offsets/in/0"


class FakeZk:
    """The kazoo calls zk_offsets makes, on a dict of znodes; `broken` makes every call fail."""

    def __init__(self):
        self.nodes, self.broken = {}, None
        self.handler = SimpleNamespace(sleep_func=lambda s: None)

    def _check(self):
        if self.broken is not None:
            raise self.broken

    def get(self, path):
        from kazoo.exceptions import NoNodeError
        self._check()
        if path not in self.nodes:
            raise NoNodeError()
        return self.nodes[path], None

    def set(self, path, data, version=-1):
        from kazoo.exceptions import NoNodeError
        self._check()
        if path not in self.nodes:
            raise NoNodeError()
        self.nodes[path] = data

    def create(self, path, data=b"", makepath=False):
        self._check()
        parts = path.split("/")
        for i in range(2, len(parts)):
            self.nodes.setdefault("/".join(parts[:i]), b"")
        self.nodes[path] = data


@pytest.fixture
def listener(tmp_path):
    md, rm = offsets_leader(tmp_path, ("in", 0))
    gc = GroupCoordinator(rm, md, time=MockTime())
    zk = FakeZk()
    server = SimpleNamespace(replica_manager=rm, group_coordinator=gc, broker_id=1, metadata=md, zk=zk)
    h = ApiHandlers()
    h.svc, h.s = BrokerService(server), server
    register_group_apis(h)
    h.limit_to_release("2.5")
    yield h, zk
    gc.shutdown()
    rm.shutdown()


def call(h, req, version, response_cls):
    body = bytes(req.encode())
    frame = struct.pack(">hhih", req.API_KEY, version, 5, 3) + b"old" + body
    out = h(frame)
    assert struct.unpack_from(">ii", out) == (len(out) - 4, 5)
    return response_cls[version].decode(out[8:])


def commit(h, version, offset, metadata="", partition=0, group="old-group"):
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    req = OffsetCommitRequest[version](group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="in", partitions=[P(
            partition_index=partition, committed_offset=offset, commit_timestamp=1_500_000_000_000,
            committed_metadata=metadata)])])
    r = call(h, req, version, OffsetCommitResponse)
    return r.topics[0].partitions[0].error_code


def fetched(h, version, partition=0, group="old-group"):
    req = OffsetFetchRequest[version](group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="in", partition_indexes=[partition])])
    p = call(h, req, version, OffsetFetchResponse).topics[0].partitions[0]
    return p.committed_offset, p.metadata, p.error_code


def test_a_v0_commit_is_kept_in_zookeeper_at_kafka_s_path_and_read_back_by_a_v0_fetch(listener):
    h, zk = listener
    assert commit(h, 0, 42, metadata="kept nowhere") == E.NONE
    assert zk.nodes[PATH] == b"42"                               # ConsumerOffset.encode: the offset in decimal
    assert fetched(h, 0) == (42, "", E.NONE)                     # NO_METADATA: v0 keeps none
    assert commit(h, 0, 43) == E.NONE and zk.nodes[PATH] == b"43"   # set, not created again


def test_offsets_committed_at_v0_and_at_v1_live_apart_as_in_kafka(listener):
    h, zk = listener
    assert commit(h, 0, 42) == E.NONE
    assert fetched(h, 1) == (-1, "", E.NONE)                     # v1 reads the coordinator's, which has none
    assert commit(h, 1, 7, metadata="m") == E.NONE               # v1: the coordinator (a standalone commit)
    assert fetched(h, 1) == (7, "m", E.NONE)
    assert fetched(h, 0) == (42, "", E.NONE) and zk.nodes[PATH] == b"42"


def test_a_v0_fetch_of_nothing_committed_or_an_unknown_partition_is_offset_minus_one_without_error(listener):
    h, zk = listener
    assert fetched(h, 0) == (-1, "", E.NONE)                     # Kafka's UNKNOWN_PARTITION
    assert fetched(h, 0, partition=9) == (-1, "", E.NONE)


def test_a_v0_commit_of_an_unknown_partition_or_too_much_metadata_writes_nothing(listener):
    h, zk = listener
    assert commit(h, 0, 1, partition=9) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(h, 0, 1, metadata="x" * 4097) == E.OFFSET_METADATA_TOO_LARGE
    assert commit(h, 0, 1, metadata="\U0001F600" * 2049) == E.OFFSET_METADATA_TOO_LARGE  # UTF-16 units
    assert zk.nodes == {}
    assert commit(h, 0, 1, metadata="x" * 4096) == E.NONE


def test_zookeeper_trouble_is_an_unknown_server_error_on_the_partition_not_a_crash(listener, monkeypatch):
    from kazoo.exceptions import BadArgumentsError
    h, zk = listener
    monkeypatch.setattr(zk_offsets, "ZK_TIMEOUT_S", 0.05)
    zk.broken = BadArgumentsError()                               # e.g. a path ZooKeeper refuses
    assert commit(h, 0, 5) == E.UNKNOWN_SERVER_ERROR
    assert fetched(h, 0) == (-1, "", E.UNKNOWN_SERVER_ERROR)
    zk.broken = None
    zk.nodes[PATH] = b"not a number"
    assert fetched(h, 0) == (-1, "", E.UNKNOWN_SERVER_ERROR)


def test_a_group_error_reaches_every_partition_of_an_offset_fetch_v1_which_has_no_top_level_error(listener):
    """OffsetFetchRequest.getErrorResponse before v2: here NOT_COORDINATOR from a coordinator that lost
    __consumer_offsets-0."""
    h, zk = listener
    h.s.group_coordinator._state = lambda group: (E.NOT_COORDINATOR, None, None)
    assert fetched(h, 1) == (-1, "", E.NOT_COORDINATOR)


class _NoGroupNorSecret:
    """An authorizer's answers: nothing on the group `denied`, nothing on the topic "secret"."""

    def __init__(self, denied):
        self.denied = denied

    def authorize(self, op, resource_type, name):
        from eoslab.common import acl
        return not (resource_type == acl.GROUP and name == self.denied) and name != "secret"

    def authorized(self, op, resource_type, names):
        return {n for n in names if self.authorize(op, resource_type, n)}


@pytest.fixture
def authorized_listener(listener):
    h, zk = listener
    h.authorizer, h.auth = object(), _NoGroupNorSecret("denied-group")
    register_group_apis(h)
    h.limit_to_release("2.5")
    return h, zk


@pytest.mark.parametrize("version", [0, 1])
def test_an_old_offset_fetch_refused_on_the_group_has_the_error_on_every_partition(authorized_listener, version):
    h, zk = authorized_listener
    assert fetched(h, version, group="denied-group") == (-1, "", E.GROUP_AUTHORIZATION_FAILED)
    assert commit(h, version, 3, group="denied-group") == E.GROUP_AUTHORIZATION_FAILED
    assert zk.nodes == {}


@pytest.mark.parametrize("version", [0, 1])
def test_an_old_commit_naming_a_topic_it_may_not_read_commits_the_others(authorized_listener, version):
    h, zk = authorized_listener
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    req = OffsetCommitRequest[version](group_id="old-group", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[P(partition_index=0, committed_offset=9,
                                                                                committed_metadata="")])
        for name in ("secret", "in")])
    r = call(h, req, version, OffsetCommitResponse)
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {"secret": E.TOPIC_AUTHORIZATION_FAILED,
                                                                     "in": E.NONE}
    assert fetched(h, version) == (9, "", E.NONE)
