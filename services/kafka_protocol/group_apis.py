"""The group coordinator's Kafka requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch and TxnOffsetCommit, translated to the calls the broker's gRPC servicer makes.

Guarantees: the lab's group coordinator runs Kafka's eager rebalance for
consumer groups; here a member's subscription (Kafka's
ConsumerProtocolSubscription, versions 0-3) becomes its topic list and the
leader's assignments (ConsumerProtocolAssignment) become partition lists,
both ways. The protocol a group uses is the first one its first member
offered that is range or roundrobin (else that member's first), kept while
the group has members; a member that does not offer it gets
INCONSISTENT_GROUP_PROTOCOL. The leader receives each member's subscription
re-encoded from its topics (version 0: assignor user data and owned
partitions are not kept). A group of another protocol type than "consumer"
is refused with INCONSISTENT_GROUP_PROTOCOL. Errors are the coordinator's
(NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, ...). A committed
offset keeps the leader epoch its OffsetCommit/TxnOffsetCommit carried, and
OffsetFetch returns it (-1 when the commit had none).
"""
from __future__ import annotations

import struct
import threading

from eoslab.v1 import broker_pb2, common_pb2
from services.kafka_protocol.apis import E, fenced_error, ms

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 8, 9, 28
PREFERRED = ("range", "roundrobin")


class ProtocolError(ValueError):
    pass


# -- the consumer protocol's embedded bytes --------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        st = struct.Struct(fmt)
        if self.pos + st.size > len(self.data):
            raise ProtocolError("truncated consumer protocol bytes")
        v = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v[0] if len(v) == 1 else v

    def string(self) -> str:
        n = self.take(">h")
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("bad string in consumer protocol bytes")
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def count(self) -> int:
        n = self.take(">i")
        if n < 0 or n > len(self.data):
            raise ProtocolError("bad array length in consumer protocol bytes")
        return n


def subscription_topics(metadata: bytes) -> list[str]:
    r = _Reader(bytes(metadata or b""))
    r.take(">h")   # version: later versions only add fields after the topics
    return [r.string() for _ in range(r.count())]


def encode_subscription(topics: list[str]) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    out += struct.pack(">i", -1)   # no user data
    return bytes(out)


def assignment_partitions(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    r = _Reader(bytes(data))
    r.take(">h")
    out = []
    for _ in range(r.count()):
        topic = r.string()
        out += [(topic, r.take(">i")) for _ in range(r.count())]
    return out


def encode_assignment(parts) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(struct.pack(">hi", 0, len(by_topic)))
    for t, ps in by_topic.items():
        b = t.encode()
        out += struct.pack(">h", len(b)) + b + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p)
                                                                                      for p in sorted(ps))
    out += struct.pack(">i", -1)
    return bytes(out)


class GroupApis:
    def __init__(self, broker_apis):
        self.svc = broker_apis.svc
        self.gc = broker_apis.s.group_coordinator   # offsets with their leader epochs (not in the gRPC messages)
        self.lock = threading.Lock()
        self.protocols: dict[str, str] = {}   # group -> protocol name in use

    def _protocol_for(self, group: str, offered: list[str], fresh: bool) -> str | None:
        with self.lock:
            current = None if fresh else self.protocols.get(group)
            if current is None:
                current = next((p for p in offered if p in PREFERRED), offered[0] if offered else None)
                if current is not None:
                    self.protocols[group] = current
            return current if current in offered else None

    def _empty(self, group: str) -> bool:
        """Whether the group has no members (its protocol is chosen anew)."""
        membership = self.svc.s.group_coordinator.membership
        try:
            with membership.cond:
                g = membership.groups.get(group)
                return g is None or not g.members
        except AttributeError:   # another membership implementation: keep the protocol once chosen
            with self.lock:
                return group not in self.protocols

    def join_group(self, header, req) -> dict:
        def fail(err):
            return {"error_code": err, "generation_id": -1, "protocol_name": "", "leader": "",
                    "member_id": req.member_id or ""}
        if req.protocol_type != "consumer":
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        offered = {p.name: p.metadata for p in req.protocols}
        fresh = self._empty(req.group_id)
        name = self._protocol_for(req.group_id, list(offered), fresh)
        if name is None:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        try:
            topics = subscription_topics(offered[name])
        except ProtocolError:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        session = ms(req.session_timeout)
        rebalance = ms(getattr(req, "rebalance_timeout", session))
        r = self.gc.join(broker_pb2.JoinGroupRequest(
            group_id=req.group_id, session_timeout_ms=session, rebalance_timeout_ms=rebalance if rebalance > 0
            else session, member_id=req.member_id or "", protocol_type="consumer", topics=topics),
            header.client_id or "")
        if r.error != E.NONE:
            return fail(r.error)
        return {"error_code": E.NONE, "generation_id": r.generation_id, "protocol_type": "consumer",
                "protocol_name": name, "leader": r.leader, "member_id": r.member_id,
                "members": [{"member_id": m.member_id, "group_instance_id": None,
                             "metadata": encode_subscription(list(m.topics))} for m in r.members]}

    def sync_group(self, header, req) -> dict:
        pb = broker_pb2.SyncGroupRequest(group_id=req.group_id, generation_id=int(req.generation_id),
                                         member_id=req.member_id)
        try:
            for a in req.assignments:
                pb.assignments[a.member_id].partitions.extend(
                    common_pb2.TopicPartition(topic=t, partition=p) for t, p in assignment_partitions(a.assignment))
        except ProtocolError:
            return {"error_code": E.INCONSISTENT_GROUP_PROTOCOL, "assignment": b""}
        r = self.svc.SyncGroup(pb, None)
        with self.lock:
            name = self.protocols.get(req.group_id)
        return {"error_code": r.error, "protocol_type": "consumer", "protocol_name": name,
                "assignment": encode_assignment(r.assignment) if r.error == E.NONE else b""}

    def heartbeat(self, header, req) -> dict:
        r = self.svc.Heartbeat(broker_pb2.HeartbeatRequest(group_id=req.group_id,
                                                           generation_id=int(req.generation_id),
                                                           member_id=req.member_id), None)
        return {"error_code": r.error}

    def leave_group(self, header, req) -> dict:
        ids = [m.member_id for m in req.members] if header.api_version >= 3 else [req.member_id]
        results = [(mid, self.svc.LeaveGroup(broker_pb2.LeaveGroupRequest(group_id=req.group_id, member_id=mid),
                                             None).error) for mid in ids]
        top = next((e for _, e in results if e != E.NONE), E.NONE) if header.api_version < 3 else E.NONE
        return {"error_code": top, "members": [{"member_id": mid, "group_instance_id": None, "error_code": e}
                                               for mid, e in results]}

    @staticmethod
    def _commit_partitions(req) -> list:
        return [broker_pb2.OffsetCommitPartition(topic=t.name, partition=int(p.partition_index),
                                                 offset=int(p.committed_offset),
                                                 metadata=p.committed_metadata or "")
                for t in req.topics for p in t.partitions]

    @staticmethod
    def _commit_epochs(req) -> dict:
        """(topic, partition) -> committed_leader_epoch (OffsetCommit v6+, TxnOffsetCommit v2+; else -1)."""
        return {(t.name, int(p.partition_index)): int(getattr(p, "committed_leader_epoch", -1))
                for t in req.topics for p in t.partitions}

    @staticmethod
    def _commit_answer(req, resp) -> dict:
        errors = {(p.topic, p.partition): p.error for p in resp.partitions}
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": resp.error if resp.error != E.NONE else errors.get((t.name, int(p.partition_index)),
                                                                              E.NONE)}
            for p in t.partitions]} for t in req.topics]}

    def offset_commit(self, header, req) -> dict:
        generation = int(getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1)))
        r = self.gc.offset_commit(broker_pb2.OffsetCommitRequest(
            group_id=req.group_id, generation_id=generation, member_id=req.member_id or "",
            partitions=self._commit_partitions(req)), self._commit_epochs(req))
        return self._commit_answer(req, r)

    def txn_offset_commit(self, header, req) -> dict:
        r = self.gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
            transactional_id=req.transactional_id, group_id=req.group_id, producer_id=int(req.producer_id),
            producer_epoch=int(req.producer_epoch), generation_id=int(getattr(req, "generation_id", -1)),
            member_id=getattr(req, "member_id", "") or "", partitions=self._commit_partitions(req)),
            self._commit_epochs(req))
        out = self._commit_answer(req, r)
        for t in out["topics"]:              # KIP-588: PRODUCER_FENCED from v3 on
            for p in t["partitions"]:
                p["error_code"] = fenced_error(p["error_code"], header.api_version, 3)
        return out

    def offset_fetch(self, header, req) -> dict:
        pb = broker_pb2.OffsetFetchRequest(group_id=req.group_id,
                                           require_stable=bool(getattr(req, "require_stable", False)))
        for t in req.topics or ():
            pb.partitions.extend(common_pb2.TopicPartition(topic=t.name, partition=int(p))
                                 for p in t.partition_indexes)
        epochs: dict = {}
        r = self.gc.offset_fetch(pb, epochs)
        by_topic: dict[str, list] = {}
        for p in r.partitions:
            by_topic.setdefault(p.topic, []).append({
                "partition_index": p.partition, "committed_offset": p.offset,
                "committed_leader_epoch": epochs.get((p.topic, p.partition), -1),
                "metadata": p.metadata, "error_code": p.error if header.api_version >= 2 or r.error == E.NONE
                else r.error})
        return {"error_code": r.error, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


VERSIONS = {JOIN_GROUP: (0, 7), SYNC_GROUP: (0, 5), HEARTBEAT: (0, 4), LEAVE_GROUP: (0, 4), OFFSET_COMMIT: (2, 8),
            OFFSET_FETCH: (1, 7), TXN_OFFSET_COMMIT: (0, 3)}


def register_group_apis(apis) -> None:
    g = GroupApis(apis)
    for key, fn in ((JOIN_GROUP, g.join_group), (SYNC_GROUP, g.sync_group), (HEARTBEAT, g.heartbeat),
                    (LEAVE_GROUP, g.leave_group), (OFFSET_COMMIT, g.offset_commit), (OFFSET_FETCH, g.offset_fetch),
                    (TXN_OFFSET_COMMIT, g.txn_offset_commit)):
        apis.register(key, *VERSIONS[key], fn)
