"""GroupMembership: the eager rebalance protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Guarantees, per group:
- a new member of a Kafka client is given Kafka's id, its client id then
  "-" and a UUID (the lab's gRPC clients: "consumer-" and 12 hex digits);
- a rebalance ends when every known member has rejoined or the rebalance
  timeout has passed (members that did not rejoin are dropped); it bumps the
  generation by one; every member that joined gets the same generation, the
  same leader and the member list goes to the leader only;
- SyncGroup hands each member the assignment the leader sent for that
  generation; a request for another generation gets ILLEGAL_GENERATION, an
  unknown member UNKNOWN_MEMBER_ID, and while a rebalance is under way
  Heartbeat and SyncGroup get REBALANCE_IN_PROGRESS;
- a member that sends no heartbeat for its session timeout is removed and a
  rebalance starts, so a stalled consumer loses its partitions and its
  generation (its later commits are refused: KIP-447 relies on this); a
  member waiting in JoinGroup or SyncGroup needs no heartbeat meanwhile
  (Kafka's MemberMetadata.hasSatisfiedHeartbeat).
- a session timeout outside [GROUP_MIN_SESSION_TIMEOUT_MS,
  GROUP_MAX_SESSION_TIMEOUT_MS] is refused with INVALID_SESSION_TIMEOUT, as
  Kafka's group.min/max.session.timeout.ms do (the lab's minimum is 1 s, not
  Kafka's 6 s, so that fault runs stay short); a rebalance timeout is held to
  the same maximum, so no JoinGroup waits longer than 30 minutes.
- `snapshot(group)` is what the coordinator stores in __consumer_offsets
  (generation, leader, members with their assignments) once a generation is
  synced and when a group empties; `load(group, meta)` installs such a
  record in a coordinator that gains the partition, so members go on in
  their generation with fresh session deadlines (Kafka's
  GroupMetadataManager) instead of rejoining from scratch.
- static members (KIP-345): a member with a group instance id that joins
  again without a member id takes the place of the member holding that id
  (its assignment, and leadership) under a new member id; while the group
  is Stable and the protocol choice does not change that is all (no
  rebalance; the answer names the leader from before), otherwise a
  rebalance starts. Any request naming the instance id with another
  member id is FENCED_INSTANCE_ID; LeaveGroup may name the instance id only.
- state: a group's state is a GroupState (Kafka's Empty, PreparingRebalance,
  CompletingRebalance, Stable) and changes only through Group.transition_to,
  which refuses a change its target does not list in VALID_PREVIOUS.
- time: session timeouts, rebalance deadlines, the initial rebalance delay
  and the JoinGroup/SyncGroup waits all read the `Time` the membership was
  given (monotonic clock); a wait ends when that clock passes its deadline.
"""
from __future__ import annotations

import base64
import threading
import uuid

from eoslab.v1 import broker_pb2, common_pb2
from eoslab.common.consumer_protocol import encode_subscription
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time
from services.broker import group_protocols
from services.broker.group_protocols import CONSUMER
from services.broker.classic_group import COMPLETING, EMPTY, PREPARING, STABLE, Group, Member



GROUP_MIN_SESSION_TIMEOUT_MS = 1000      # Kafka: 6000
GROUP_MAX_SESSION_TIMEOUT_MS = 1800000   # Kafka: 1800000
RECHECK_S = 0.05   # a waiting JoinGroup/SyncGroup re-checks its group at least this often (a rebalance also
                   # ends by time alone: the initial delay or the rebalance timeout passing)


class GroupMembership:
    def __init__(self, initial_rebalance_delay_s: float = 0.3, time: Time = SYSTEM):
        self.time = time
        self.cond = threading.Condition()
        self.groups: dict[str, Group] = {}
        self.initial_delay = initial_rebalance_delay_s

    def _wait(self, done, deadline: float) -> bool:
        """Holding self.cond: wait until done() or this clock reaches `deadline`; done()'s last value."""
        while not done():
            left = deadline - self.time.monotonic()
            if left <= 0:
                return False
            step = min(left, RECHECK_S)
            if not self.time.wait_for(self.cond, done, step) and step == left:
                return done()       # the wait ran to the deadline
        return True

    def _prepare(self, g: Group, now: float, delay: float) -> None:
        if g.state != PREPARING:
            g.transition_to(PREPARING)
            for m in g.members.values():
                m.joined = False
            g.rebalance_deadline = now + delay
        self.cond.notify_all()

    def _maybe_complete(self, g: Group, now: float) -> None:
        if g.state != PREPARING:
            return
        joined = [m for m in g.members.values() if m.joined]
        if not joined:
            return
        if len(joined) < len(g.members) and now < g.rebalance_deadline:
            return
        if g.generation == 0 and now < g.rebalance_deadline and len(joined) == len(g.members):
            return   # the first rebalance waits the initial delay for more members
        g.members = {m.member_id: m for m in joined}
        g.generation += 1
        g.leader = sorted(g.members)[0]
        g.protocol = group_protocols.select(g.members.values())
        g.transition_to(COMPLETING)
        for m in g.members.values():
            m.assignment, m.assignment_bytes = [], None
            m.last_heartbeat = now
            if g.protocol_type == CONSUMER:
                m.topics = group_protocols.consumer_topics(
                    CONSUMER, group_protocols.metadata_for(m.protocols, g.protocol)) or m.topics
        self.cond.notify_all()

    def expire(self) -> None:
        now = self.time.monotonic()
        with self.cond:
            for g in self.groups.values():
                gone = [m for m in g.members.values()
                        if now - m.last_heartbeat > m.session_timeout and not (g.state == PREPARING and m.joined)
                        and not m.awaiting_sync]
                for m in gone:
                    del g.members[m.member_id]
                if gone:
                    if g.members:
                        self._prepare(g, now, max(m.rebalance_timeout for m in g.members.values()))
                    else:
                        g.become_empty()
                self._maybe_complete(g, now)

    def join(self, req, client_id: str | None = None) -> broker_pb2.JoinGroupResponse:
        """A new member's id is Kafka's `clientId-UUID` when the Kafka request's client id is given (the
        range and roundrobin assignors order members by id); the lab's gRPC clients get `consumer-<hex>`."""
        if not GROUP_MIN_SESSION_TIMEOUT_MS <= req.session_timeout_ms <= GROUP_MAX_SESSION_TIMEOUT_MS or \
                req.rebalance_timeout_ms > GROUP_MAX_SESSION_TIMEOUT_MS:
            return broker_pb2.JoinGroupResponse(error=E.INVALID_SESSION_TIMEOUT, generation_id=-1)
        now = self.time.monotonic()
        protocols = group_protocols.offered(req)
        # the lab's gRPC clients may leave the type out; a Kafka client must name one
        protocol_type = req.protocol_type if not len(req.topics) else (req.protocol_type or CONSUMER)
        instance = req.group_instance_id
        with self.cond:
            g = self.groups.setdefault(req.group_id, Group(req.group_id))
            mid = req.member_id
            if mid and g.fenced(instance, mid):
                return broker_pb2.JoinGroupResponse(error=E.FENCED_INSTANCE_ID, generation_id=-1)
            if mid and mid not in g.members:
                return broker_pb2.JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, generation_id=-1)
            others = [x for k, x in g.members.items() if k != mid]
            err = group_protocols.check_join(g.protocol_type, others, protocol_type, protocols)
            if err != E.NONE:
                return broker_pb2.JoinGroupResponse(error=err, generation_id=-1)
            if not others:
                g.protocol_type = protocol_type
            topics = list(req.topics) or group_protocols.consumer_topics(protocol_type, protocols[0][1])
            leader_before, replaced = g.leader, False
            if not mid:
                prefix = instance or client_id
                mid = f"consumer-{uuid.uuid4().hex[:12]}" if prefix is None else f"{prefix}-{uuid.uuid4()}"
                old = g.static_member(instance)
                if old is not None:          # KIP-345: a static member is back under a new member id
                    g.members[mid] = g.members.pop(old)
                    g.members[mid].member_id, replaced = mid, True
                    if g.leader == old:
                        g.leader = mid
            st = max(req.session_timeout_ms, 100) / 1000.0
            rt = max(req.rebalance_timeout_ms or req.session_timeout_ms, 100) / 1000.0
            m = g.members.get(mid)
            if m is None:
                m = g.members[mid] = Member(mid, topics, st, rt, now)
            m.topics, m.session_timeout, m.rebalance_timeout, m.last_heartbeat = topics, st, rt, now
            m.protocols, m.client_id, m.group_instance_id = protocols, client_id or "", instance
            if replaced and g.state == STABLE and group_protocols.select(g.members.values()) == g.protocol:
                # Kafka's updateStaticMemberAndRebalance: no rebalance; the member's SyncGroup gets the
                # assignment it had, and the leader named is the one before the replacement, so a
                # replaced leader does not assign again in a Stable group
                return broker_pb2.JoinGroupResponse(error=E.NONE, generation_id=g.generation, member_id=mid,
                                                    protocol_name=g.protocol, protocol_type=g.protocol_type,
                                                    leader=leader_before)
            if g.state != PREPARING:
                delay = self.initial_delay if g.generation == 0 or g.state == EMPTY else rt
                self._prepare(g, now, delay)
            m.joined = True

            def joined() -> bool:
                return g.state in (COMPLETING, STABLE) and mid in g.members

            def settled() -> bool:
                self._maybe_complete(g, self.time.monotonic())
                return joined() or (mid not in g.members and g.state != PREPARING)
            if not self._wait(settled, now + rt + 1.0):
                return broker_pb2.JoinGroupResponse(error=E.REBALANCE_IN_PROGRESS, generation_id=-1)
            if not joined():
                return broker_pb2.JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, generation_id=-1)
            resp = broker_pb2.JoinGroupResponse(error=E.NONE, generation_id=g.generation, protocol_name=g.protocol,
                                                leader=g.leader, member_id=mid, protocol_type=g.protocol_type)
            if mid == g.leader:
                for x in g.members.values():
                    resp.members.add(member_id=x.member_id, topics=x.topics, group_instance_id=x.group_instance_id,
                                     metadata=group_protocols.metadata_for(x.protocols, g.protocol))
            return resp

    def sync(self, req) -> broker_pb2.SyncGroupResponse:
        with self.cond:
            g = self.groups.get(req.group_id)
            if g is not None and g.fenced(req.group_instance_id, req.member_id):
                return broker_pb2.SyncGroupResponse(error=E.FENCED_INSTANCE_ID)
            if g is None or req.member_id not in g.members:
                return broker_pb2.SyncGroupResponse(error=E.UNKNOWN_MEMBER_ID)
            if req.generation_id != g.generation:
                return broker_pb2.SyncGroupResponse(error=E.ILLEGAL_GENERATION)
            if g.state == PREPARING:
                return broker_pb2.SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS)
            if req.member_id == g.leader and g.state == COMPLETING:
                for mid, plist in req.assignments.items():
                    if mid in g.members:
                        g.members[mid].assignment = list(plist.partitions)
                for mid, data in req.assignment_bytes.items():
                    if mid in g.members:
                        g.members[mid].assignment_bytes = bytes(data)
                        g.members[mid].assignment = group_protocols.consumer_assignment(g.protocol_type, bytes(data))
                g.transition_to(STABLE)
                g.synced_generation = g.generation
                self.cond.notify_all()
            deadline = self.time.monotonic() + g.members[req.member_id].rebalance_timeout

            def settled() -> bool:
                return g.synced_generation == req.generation_id or g.generation != req.generation_id or \
                    g.state == PREPARING
            waiting = g.members[req.member_id]
            waiting.awaiting_sync = True
            try:
                self._wait(settled, deadline)
            finally:
                waiting.awaiting_sync = False
            if g.synced_generation != req.generation_id:
                return broker_pb2.SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS)
            m = g.members.get(req.member_id)
            if m is None:
                return broker_pb2.SyncGroupResponse(error=E.UNKNOWN_MEMBER_ID)
            m.last_heartbeat = self.time.monotonic()
            data = group_protocols.assignment_bytes(g.protocol_type, m)
            return broker_pb2.SyncGroupResponse(error=E.NONE, assignment=m.assignment, assignment_bytes=data,
                                                protocol_type=g.protocol_type, protocol_name=g.protocol)

    def heartbeat(self, req) -> broker_pb2.HeartbeatResponse:
        with self.cond:
            g = self.groups.get(req.group_id)
            if g is not None and g.fenced(req.group_instance_id, req.member_id):
                return broker_pb2.HeartbeatResponse(error=E.FENCED_INSTANCE_ID)
            if g is None or req.member_id not in g.members:
                return broker_pb2.HeartbeatResponse(error=E.UNKNOWN_MEMBER_ID)
            if req.generation_id != g.generation:
                return broker_pb2.HeartbeatResponse(error=E.ILLEGAL_GENERATION)
            g.members[req.member_id].last_heartbeat = self.time.monotonic()
            if g.state == PREPARING:
                return broker_pb2.HeartbeatResponse(error=E.REBALANCE_IN_PROGRESS)
            return broker_pb2.HeartbeatResponse(error=E.NONE)

    def leave(self, req) -> broker_pb2.LeaveGroupResponse:
        with self.cond:
            g = self.groups.get(req.group_id)
            mid = req.member_id
            if g is not None and req.group_instance_id:       # KIP-345: leave by instance id
                holder = g.static_member(req.group_instance_id)
                if holder is not None and mid and mid != holder:
                    return broker_pb2.LeaveGroupResponse(error=E.FENCED_INSTANCE_ID)
                mid = holder or mid
            if g is None or mid not in g.members:
                return broker_pb2.LeaveGroupResponse(error=E.UNKNOWN_MEMBER_ID)
            del g.members[mid]
            if g.members:
                self._prepare(g, self.time.monotonic(), max(m.rebalance_timeout for m in g.members.values()))
            else:
                g.become_empty()
            return broker_pb2.LeaveGroupResponse(error=E.NONE)

    def snapshot(self, group: str) -> dict | None:
        """The group's metadata as stored in __consumer_offsets (None: not a group here)."""
        with self.cond:
            g = self.groups.get(group)
            if g is None:
                return None
            return {"generation": g.generation, "leader": g.leader, "protocol_type": g.protocol_type,
                    "protocol": g.protocol,
                    "state": STABLE if g.members and g.state == STABLE else EMPTY if not g.members else g.state,
                    "members": [{"id": m.member_id, "topics": m.topics, "session_ms": int(m.session_timeout * 1000),
                                 "rebalance_ms": int(m.rebalance_timeout * 1000),
                                 "assignment": [[t, p] for t, p in _pairs(m.assignment)],
                                 "protocols": [[n, _b64(d)] for n, d in m.protocols], "client_id": m.client_id,
                                 "instance": m.group_instance_id,
                                 "assignment_bytes": None if m.assignment_bytes is None
                                 else _b64(m.assignment_bytes)}
                                for m in g.members.values()]}

    def load(self, group: str, meta: dict | None) -> None:
        """Install the stored metadata of a group this coordinator now serves (replacing what it
        remembered from an earlier time as coordinator). A group stored mid-rebalance comes back
        Stable only if it was synced; otherwise its members rejoin."""
        now = self.time.monotonic()
        with self.cond:
            if meta is None:
                self.groups.pop(group, None)
                return
            g = Group(group, generation=int(meta["generation"]), leader=meta.get("leader", ""),
                      protocol_type=meta.get("protocol_type", CONSUMER), protocol=meta.get("protocol", "range"))
            for d in meta.get("members", []):
                m = Member(d["id"], list(d.get("topics", [])), d.get("session_ms", 10000) / 1000.0,
                           d.get("rebalance_ms", 10000) / 1000.0, now)
                m.assignment = [common_pb2.TopicPartition(topic=t, partition=p) for t, p in d.get("assignment", [])]
                m.protocols = [(n, base64.b64decode(x)) for n, x in d["protocols"]] if "protocols" in d \
                    else [("range", encode_subscription(m.topics))]     # stored before protocols were kept
                m.client_id, m.group_instance_id = d.get("client_id", ""), d.get("instance", "")
                raw = d.get("assignment_bytes")
                m.assignment_bytes = None if raw is None else base64.b64decode(raw)
                g.members[m.member_id] = m
            if g.members and meta.get("state") == STABLE:
                g.state, g.synced_generation = STABLE, g.generation    # loaded as stored, not a transition
            elif g.members:
                self._prepare(g, now, max(m.rebalance_timeout for m in g.members.values()))
            self.groups[group] = g
            self.cond.notify_all()

    def check_commit(self, group: str, generation: int, member_id: str, transactional: bool = False,
                     instance: str = "") -> int:
        """Who may commit offsets, as Kafka's GroupCoordinator.validateOffsetCommit: generation -1 to an
        empty (or unknown) group is a standalone commit; a commit naming a member or a generation must
        come from a current member of that generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION); a plain
        OffsetCommit with neither to a group that has members is UNKNOWN_MEMBER_ID, and one during
        CompletingRebalance is REBALANCE_IN_PROGRESS. TxnOffsetCommit skips the last two (its older
        versions carry no member, KIP-447)."""
        with self.cond:
            g = self.groups.get(group)
            if g is not None and g.fenced(instance, member_id):
                return E.FENCED_INSTANCE_ID
            if generation < 0 and (g is None or g.state == EMPTY):
                return E.NONE
            if generation >= 0 or member_id:
                if g is None and generation >= 0 and not transactional:
                    return E.ILLEGAL_GENERATION
                if g is None or member_id not in g.members:
                    return E.UNKNOWN_MEMBER_ID
                if generation != g.generation:
                    return E.ILLEGAL_GENERATION
                if not transactional and g.state == COMPLETING:
                    return E.REBALANCE_IN_PROGRESS
                return E.NONE
            if not transactional and g.state != EMPTY:
                return E.UNKNOWN_MEMBER_ID
            return E.NONE


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pairs(assignment) -> list[tuple[str, int]]:
    out = []
    for a in assignment:
        if isinstance(a, (tuple, list)):
            out.append((a[0], int(a[1])))
        else:
            out.append((a.topic, int(a.partition)))
    return out
