"""ConsumerGroupHeartbeat and ConsumerGroupDescribe over Kafka's wire (services.kafka_protocol.
consumer_group_apis), in one process: the frames a client sends, answered through ApiHandlers with
Kafka's fields (member id, epoch, heartbeat interval, assignment by topic id), a group this broker does
not coordinate answered NOT_COORDINATOR, an unknown group described GROUP_ID_NOT_FOUND, and OffsetFetch
v9's member id and epoch checked for a consumer-protocol group."""
import uuid
from types import SimpleNamespace as NS

import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.consumer_group_manager import ConsumerGroupManager
from services.kafka_protocol.apis import ApiHandlers
from eoslab.v1 import broker_pb2
from services.kafka_protocol.consumer_group_apis import register_consumer_group_apis
from services.kafka_protocol.group_apis import register_group_apis
from tests.kafka_protocol.test_listener import _request, _response

pytestmark = pytest.mark.fast
TID = uuid.UUID(int=9)


def offset_fetch(req, epochs, client_id):
    return broker_pb2.OffsetFetchResponse(error=E.NONE, partitions=[
        broker_pb2.OffsetFetchPartition(topic=t.topic, partition=t.partition, offset=5) for t in req.partitions])


def handlers(owner=True):
    cg = ConsumerGroupManager(lambda: {"orders": (TID, 3)}, time=MockTime())
    h = ApiHandlers()
    h.svc = None
    h.s = NS(group_coordinator=NS(owns=lambda g: E.NONE if owner else E.NOT_COORDINATOR, consumer_groups=cg,
                                  offset_fetch=offset_fetch), metadata=None)
    register_consumer_group_apis(h, "4.0")
    register_group_apis(h)
    return h


def call(h, key, version, **fields):
    return _response(h(_request(key, version, 7, **fields)[4:])[4:], key, version)[1]


def join(h, version, member_id=""):
    return call(h, 68, version, group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout=30000,
                subscribed_topic_names=["orders"], topic_partitions=[])


def test_a_v1_join_over_the_wire_gets_its_epoch_interval_and_assignment_by_topic_id():
    r = join(handlers(), 1, member_id="client-made-id")
    assert (r.error_code.value, r.member_id, r.member_epoch) == (0, "client-made-id", 1)
    assert r.heartbeat_interval.total_seconds() == 1.0
    assert [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions] == [(TID, [0, 1, 2])]


def test_a_v0_join_without_an_id_gets_one_and_v1_without_one_is_invalid():
    h = handlers()
    assert len(join(h, 0).member_id) == 22
    assert join(h, 1).error_code.value == E.INVALID_REQUEST


def test_another_broker_s_group_is_not_coordinator_and_changes_nothing():
    h = handlers(owner=False)
    assert join(h, 1, member_id="m").error_code.value == E.NOT_COORDINATOR
    assert h.s.group_coordinator.consumer_groups.group("g") is None


def test_describe_shows_members_and_an_unknown_group_is_not_found():
    h = handlers()
    join(h, 1, member_id="m")
    d = call(h, 69, 0, group_ids=["g", "nope"], include_authorized_operations=False)
    g, nope = d.groups
    assert (g.error_code.value, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 1, "uniform")
    assert [(m.member_id, m.member_epoch, sorted(m.assignment.topic_partitions[0].partitions)) for m in g.members] \
        == [("m", 1, [0, 1, 2])]
    assert g.members[0].assignment.topic_partitions[0].topic_name == "orders"
    assert nope.error_code.value == E.GROUP_ID_NOT_FOUND


def test_offset_fetch_v9_checks_the_member_and_its_epoch():
    h = handlers()
    join(h, 1, member_id="m")

    def fetch(member_id, epoch, version=9):
        extra = {"member_id": member_id, "member_epoch": epoch} if version >= 9 else {}
        r = call(h, 9, version, require_stable=True, groups=[
            {"group_id": "g", "topics": [{"name": "orders", "partition_indexes": [0]}], **extra}])
        g = r.groups[0]
        return g.error_code.value, [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
    assert fetch("m", 1) == (0, [(0, 5)])
    assert fetch("m", 0) == (113, [])                      # STALE_MEMBER_EPOCH
    assert fetch("m", 2) == (110, [])                      # FENCED_MEMBER_EPOCH
    assert fetch("zombie", 1) == (E.UNKNOWN_MEMBER_ID, [])
    assert fetch(None, -1) == (0, [(0, 5)])                # an admin's fetch names no member
    assert fetch(None, -1, version=8) == (0, [(0, 5)])
