"""Which protocol a classic group runs, as Kafka's ClassicGroup decides it (supportsProtocols,
selectProtocol); the coordinator passes the chosen protocol's bytes through untouched.

Guarantees: a member offers its protocols in preference order, each with opaque metadata. An empty
group takes any non-empty protocol type with at least one protocol; a group with members takes a
member only with the group's protocol type and at least one protocol every other member offers
(else INCONSISTENT_GROUP_PROTOCOL). When a generation forms, each member votes for its most preferred
protocol that every member offers and the protocol with the most votes wins; a tie goes to the
protocol the earliest-joined voter prefers, so the choice never depends on dict or hash order. The
lab's gRPC clients offer no protocol list: they offer ("range", their subscription encoded).
"""
from __future__ import annotations

from eoslab.common.consumer_protocol import ProtocolError, assignment_partitions, encode_assignment, \
    encode_subscription, subscription_topics
from eoslab.common.errors import E
from eoslab.v1 import common_pb2

CONSUMER = "consumer"
Protocols = list[tuple[str, bytes]]


def offered(req) -> Protocols:
    """The protocols a JoinGroup offers: a Kafka client's as sent, the lab's ("range", topics) (a
    request with neither offers nothing and is refused)."""
    if len(req.protocols) or not len(req.topics):
        return [(p.name, bytes(p.metadata)) for p in req.protocols]
    return [("range", encode_subscription(list(req.topics)))]


def candidates(members) -> set[str]:
    """The protocols every member offers."""
    sets = [{name for name, _ in m.protocols} for m in members]
    return set.intersection(*sets) if sets else set()


def check_join(group_protocol_type: str, others, protocol_type: str, protocols: Protocols) -> int:
    """E.NONE when a member offering `protocols` under `protocol_type` may join a group whose other
    members are `others` (Kafka: GroupCoordinator's INCONSISTENT_GROUP_PROTOCOL checks)."""
    if not protocol_type or not protocols:
        return E.INCONSISTENT_GROUP_PROTOCOL
    others = list(others)
    if not others:
        return E.NONE
    if protocol_type != group_protocol_type:
        return E.INCONSISTENT_GROUP_PROTOCOL
    if not {name for name, _ in protocols} & candidates(others):
        return E.INCONSISTENT_GROUP_PROTOCOL
    return E.NONE


def select(members) -> str:
    """The protocol of a new generation: the most voted of those every member offers (`members` in
    the order they joined)."""
    members = list(members)
    common = candidates(members)
    votes: dict[str, int] = {}
    for m in members:
        vote = next((name for name, _ in m.protocols if name in common), None)
        if vote is not None:
            votes[vote] = votes.get(vote, 0) + 1
    if not votes:
        return ""
    return max(votes, key=lambda name: votes[name])   # dicts keep insertion order: ties go to the first voter


def metadata_for(protocols: Protocols, name: str) -> bytes:
    return next((data for n, data in protocols if n == name), b"")


def consumer_topics(protocol_type: str, metadata: bytes) -> list[str]:
    """A consumer member's subscribed topics ([] for another protocol type or bytes that do not parse:
    the coordinator does not need them, only the lab's gRPC leaders do)."""
    if protocol_type != CONSUMER:
        return []
    try:
        return subscription_topics(metadata)
    except ProtocolError:
        return []


def consumer_assignment(protocol_type: str, data: bytes) -> list:
    """A Kafka leader's assignment as partitions, for the lab's gRPC members and the stored metadata
    ([] for another protocol type or bytes that do not parse)."""
    if protocol_type != CONSUMER:
        return []
    try:
        return [common_pb2.TopicPartition(topic=t, partition=p) for t, p in assignment_partitions(data)]
    except ProtocolError:
        return []


def assignment_bytes(protocol_type: str, member) -> bytes:
    """What a member's SyncGroup (and DescribeGroups) answers: the leader's bytes as sent, or, when a lab
    gRPC leader assigned partitions, Kafka's encoding of them for a consumer group (else nothing)."""
    if member.assignment_bytes is not None:
        return member.assignment_bytes
    return encode_assignment(member.assignment) if protocol_type == CONSUMER else b""
