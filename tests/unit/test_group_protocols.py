"""The classic group protocol's pass-through and protocol choice in one process (Kafka's ClassicGroup):
members' protocol metadata and the leader's assignments reach the other side as sent, for any protocol
type; the protocol is the most voted of those every member offers."""
import threading
from types import SimpleNamespace as NS

import pytest

from eoslab.common.consumer_protocol import encode_assignment, subscription_topics
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker import group_protocols as gp
from services.broker import membership as ms

pytestmark = pytest.mark.fast

T = ms.GROUP_MIN_SESSION_TIMEOUT_MS
# A ConsumerProtocolSubscription v1 with user data and an owned partition (what KIP-429's cooperative-sticky
# assignor sends), written out by hand so nothing of the lab's encoders is in it.
COOPERATIVE = (b"\x00\x01" b"\x00\x00\x00\x01" b"\x00\x01t"            # version 1, topics ["t"]
               b"\x00\x00\x00\x03abc"                                   # user data b"abc"
               b"\x00\x00\x00\x01" b"\x00\x01t" b"\x00\x00\x00\x01" b"\x00\x00\x00\x02")  # owned t-2


def join(m, protocols, ptype="consumer", member_id="", group="g"):
    return m.join(broker_pb2.JoinGroupRequest(
        group_id=group, session_timeout_ms=T, rebalance_timeout_ms=T, member_id=member_id, protocol_type=ptype,
        protocols=[broker_pb2.GroupProtocol(name=n, metadata=d) for n, d in protocols]), "client")


def test_a_member_s_metadata_and_the_leader_s_assignment_pass_through_untouched():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    r = join(m, [("cooperative-sticky", COOPERATIVE), ("range", b"\x00\x00\x00\x00\x00\x00")])
    assert r.error == E.NONE and r.protocol_name == "cooperative-sticky" and r.protocol_type == "consumer"
    assert [x.metadata for x in r.members] == [COOPERATIVE]          # user data and owned partitions kept
    assert list(r.members[0].topics) == ["t"]                        # parsed for the lab's own leaders
    sent = encode_assignment([("t", 2), ("t", 0)]) + b"\x00\x00"     # trailing bytes a parser would drop
    s = m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id,
                                           assignment_bytes={r.member_id: sent}))
    assert s.error == E.NONE and s.assignment_bytes == sent
    assert (s.protocol_type, s.protocol_name) == ("consumer", "cooperative-sticky")
    assert sorted((tp.topic, tp.partition) for tp in s.assignment) == [("t", 0), ("t", 2)]


def test_connect_and_other_protocol_types_are_served_and_their_bytes_never_parsed():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    r = join(m, [("sessioned", b"\xff not a consumer subscription")], ptype="connect")
    assert r.error == E.NONE and (r.protocol_type, r.protocol_name) == ("connect", "sessioned")
    assert r.members[0].metadata == b"\xff not a consumer subscription" and not r.members[0].topics
    s = m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id,
                                           assignment_bytes={r.member_id: b"\x01\x02"}))
    assert s.error == E.NONE and s.assignment_bytes == b"\x01\x02" and not s.assignment
    # a member of another type, or with no protocol in common, is refused while the group has members
    assert join(m, [("sessioned", b"")], ptype="consumer").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(m, [("compatible", b"")], ptype="connect").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(m, [], ptype="connect", group="h").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(m, [("x", b"")], ptype="", group="h").error == E.INCONSISTENT_GROUP_PROTOCOL


def test_the_protocol_is_the_most_voted_of_those_every_member_offers():
    def member(*names):
        return NS(protocols=[(n, b"") for n in names])
    assert gp.select([member("cooperative-sticky", "range"), member("range", "cooperative-sticky"),
                      member("range")]) == "range"                    # only range is common
    assert gp.select([member("a", "b"), member("b", "a"), member("a", "b")]) == "a"
    assert gp.select([member("b", "a"), member("a", "b")]) == "b"     # a tie: the first voter's choice
    assert gp.select([member("a"), member("b")]) == ""


def test_a_second_member_joins_and_the_leader_sees_both_members_bytes():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    first = join(m, [("cooperative-sticky", COOPERATIVE)])
    m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=first.member_id, generation_id=first.generation_id,
                                       assignment_bytes={first.member_id: encode_assignment([("t", 0)])}))
    answers = {}
    other = threading.Thread(target=lambda: answers.setdefault("second", join(m, [("cooperative-sticky", b"B")])))
    other.start()
    again = join(m, [("cooperative-sticky", b"A")], member_id=first.member_id)   # the first rejoins
    other.join(10)
    second = answers["second"]
    assert again.error == second.error == E.NONE and again.generation_id == second.generation_id == 2
    leader = again if again.member_id == again.leader else second
    assert sorted(x.metadata for x in leader.members) == [b"A", b"B"]


def test_stored_group_metadata_keeps_the_bytes_and_old_records_load_as_range():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    r = join(m, [("cooperative-sticky", COOPERATIVE)])
    m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id,
                                       assignment_bytes={r.member_id: b"\x00\x07raw"}))
    other = ms.GroupMembership()
    other.load("g", m.snapshot("g"))
    g = other.groups["g"]
    assert (g.protocol_type, g.protocol, g.state) == ("consumer", "cooperative-sticky", ms.STABLE)
    assert g.members[r.member_id].protocols == [("cooperative-sticky", COOPERATIVE)]
    s = other.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id))
    assert s.assignment_bytes == b"\x00\x07raw"
    old = {"generation": 3, "leader": "m1", "state": "Stable",
           "members": [{"id": "m1", "topics": ["t"], "assignment": [["t", 0]]}]}
    other.load("old", old)
    g = other.groups["old"]
    assert (g.protocol_type, g.protocol) == ("consumer", "range")
    assert subscription_topics(g.members["m1"].protocols[0][1]) == ["t"]


def test_the_lab_s_grpc_members_still_speak_topics_and_partitions():
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    r = m.join(broker_pb2.JoinGroupRequest(group_id="g", session_timeout_ms=T, rebalance_timeout_ms=T,
                                           protocol_type="consumer", topics=["a", "b"]))
    assert r.error == E.NONE and r.protocol_name == "range" and list(r.members[0].topics) == ["a", "b"]
    pl = broker_pb2.PartitionList(partitions=[{"topic": "a", "partition": 1}])
    s = m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=r.member_id, generation_id=r.generation_id,
                                           assignments={r.member_id: pl}))
    assert [(tp.topic, tp.partition) for tp in s.assignment] == [("a", 1)]
    assert s.assignment_bytes == encode_assignment([("a", 1)])        # a Kafka member would read this
