"""ConsumerGroupManager: the consumer-protocol part of Kafka's GroupMetadataManager (KIP-848) — a
ConsumerGroupHeartbeat joins, heartbeats or leaves, and members that stop heartbeating are fenced.

Guarantees:
- a heartbeat is checked (consumer_group_heartbeat.validate, Kafka's
  throwIfConsumerGroupHeartbeatRequestIsInvalid) before anything changes; on v0 a joining member
  without an id gets one from the coordinator, from v1 the client must bring its own;
- member epoch 0 joins (creating the group), > 0 heartbeats, -1 leaves, -2 leaves a static member's
  place open for its instance id; an unknown member is UNKNOWN_MEMBER_ID, an epoch above the
  member's or below it (but for the previous epoch with owned partitions within the assignment, whose
  answer may have been lost) is FENCED_MEMBER_EPOCH; another member's instance id is
  FENCED_INSTANCE_ID, one not yet released UNRELEASED_INSTANCE_ID;
- the group epoch is bumped when a member joins, leaves, is fenced or changes its subscription, and
  when a subscribed topic appears or gains partitions; then the target assignment is computed anew
  by the preferred server assignor (the one most members ask for, else the first configured);
- each member moves toward its target through CurrentAssignmentBuilder, so no partition is held by
  two members; the answer carries the member's assignment on a full heartbeat or when it changed;
- time (Kafka's timer): a member not heard from for the session timeout, or still holding partitions
  to revoke a rebalance timeout after it was asked, is fenced by `expire()`, which reads `time`;
- stored (Kafka's records in __consumer_offsets): a change a heartbeat or `expire()` makes to a group
  (group epoch, subscription, target assignment, a member's join, leave, epoch or assignment) is
  handed to `store(group id, ConsumerGroup.to_record())` before the answer; a store that fails undoes
  the change (as Kafka's timeline reverts what it could not write) and the heartbeat answers the
  store's error, so no client is told of a change the log lacks; `delete_group` stores the tombstone
  (None) first; `load(group id, stored)` installs a stored group in a new coordinator, each member with
  a fresh session (and a rebalance timeout when it has partitions to revoke); a fencing `expire()`
  cannot store because this broker is no longer the coordinator (NOT_COORDINATOR) forgets the group;
- shards (Kafka's coordinator runtime, one per __consumer_offsets partition): the changes of the groups
  of one offsets partition are made and stored one at a time under that shard's lock; the tables'
  `lock` is never held while a change is stored, so a store that waits (acks=all with a follower cut
  off) holds up only its own shard's groups, never another shard's heartbeats or `expire()`. A shard
  lock is taken before `lock`, never after it;
- a group id held by a classic group with members is not a consumer group (GROUP_ID_NOT_FOUND); an
  empty classic group is replaced by the consumer group, as Kafka's maybeDeleteEmptyClassicGroup.
"""
from __future__ import annotations

import logging
import threading
from collections import Counter

from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time
from services.broker.consumer_group import ConsumerGroup, IllegalStateError
from services.broker.consumer_group_assignors import DEFAULT_ASSIGNORS, assignors as make_assignors
from services.broker.consumer_group_heartbeat import Heartbeat, validate
from services.broker.consumer_group_store import StoredGroups
from services.broker.consumer_group_member import (
    FENCED_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    UNRELEASED_INSTANCE_ID, ConsumerGroupMember, GroupError, IllegalMemberTransition, MemberState,
    new_member_id)
from services.broker.current_assignment_builder import CurrentAssignmentBuilder
from services.broker.target_assignment_builder import TargetAssignmentBuilder
from services.common.internal_topics import DEFAULT_OFFSETS_PARTITIONS, partition_for

log = logging.getLogger(__name__)
# The lab's defaults (Kafka's group.consumer.session.timeout.ms is 45000, heartbeat.interval.ms 5000):
# shorter, for a lab on one machine.
SESSION_TIMEOUT_MS = 10000
HEARTBEAT_INTERVAL_MS = 1000


class ConsumerGroupManager(StoredGroups):
    def __init__(self, topics, time: Time = SYSTEM, session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS, assignors=DEFAULT_ASSIGNORS,
                 classic_members=lambda group: None, drop_classic=lambda group: None,
                 store=lambda group, stored: E.NONE):
        """`topics()`: topic name -> (topic id, partition count) of the cluster now;
        `classic_members(group)`: the members of a classic group of that id (None: there is none);
        `store(group, stored or None)`: write the group's record (None: its tombstone), its error."""
        self.topics, self.time = topics, time
        self.session_timeout_ms, self.heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self.group_config = lambda group_id: {}   # a group's own configs (KafkaServer: GroupConfigs.of)
        self.assignors = make_assignors(assignors)
        self.classic_members, self.drop_classic, self.store = classic_members, drop_classic, store
        self.lock = threading.RLock()          # the tables below; held briefly, never while storing
        self._shards = [threading.RLock() for _ in range(DEFAULT_OFFSETS_PARTITIONS)]
        self.groups: dict[str, ConsumerGroup] = {}
        self.sessions: dict[tuple[str, str], float] = {}               # (group, member) -> deadline
        self.rebalances: dict[tuple[str, str], tuple[float, int]] = {}  # -> (deadline, epoch to leave)

    # -- the API ------------------------------------------------------------------------------

    def session_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else the broker's group.consumer.session.timeout.ms."""
        return self.group_config(group_id).get("consumer.session.timeout.ms", self.session_timeout_ms)

    def heartbeat_ms(self, group_id: str) -> int:
        return self.group_config(group_id).get("consumer.heartbeat.interval.ms", self.heartbeat_interval_ms)
    def heartbeat(self, r: Heartbeat) -> dict:
        try:
            validate(r, self.assignors)
            with self.shard_lock(r.group_id):
                if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                    return self._persisted(r.group_id, lambda: self._leave(r))
                return self._persisted(r.group_id, lambda: self._heartbeat(r))
        except GroupError as e:
            log.info("group %s: heartbeat of %s at epoch %d refused: %s", r.group_id, r.member_id, r.member_epoch,
                     e.message)
            return self._error(e.code, e.message)
        except (IllegalStateError, IllegalMemberTransition) as e:   # a broken guarantee: Kafka's answer to one
            log.error("group %s: heartbeat of %s failed: %s", r.group_id, r.member_id, e)
            return self._error(E.UNKNOWN_SERVER_ERROR, str(e))

    def shard_lock(self, group_id: str) -> threading.RLock:
        """The lock of the group's shard: its __consumer_offsets partition (at the lab's partition count)."""
        return self._shards[partition_for(group_id, len(self._shards))]

    @staticmethod
    def _error(code: int, message: str) -> dict:
        return {"error_code": code, "error_message": message or None, "member_id": None, "member_epoch": 0,
                "heartbeat_interval_ms": 0, "assignment": None}

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """An OffsetFetch's member check (v9), as Kafka's ConsumerGroup.validateOffsetFetch: a consumer group
        checks the member and its epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH);
        a fetch from another group is not checked."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.NONE
            try:
                g.validate_offset_fetch(member_id, member_epoch)
            except GroupError as e:
                return e.code
            return E.NONE

    def remove_group(self, group_id: str) -> None:
        """Forget a group (an empty one a classic join takes over, or one of a partition no longer led)."""
        with self.lock:
            self.groups.pop(group_id, None)
            for key in [k for k in self.sessions if k[0] == group_id]:
                self.sessions.pop(key, None)
            for key in [k for k in self.rebalances if k[0] == group_id]:
                self.rebalances.pop(key, None)

    def expire(self) -> list[tuple[str, str]]:
        """Fence the members whose session or rebalance timeout passed; (group, member) of each."""
        now = self.time.monotonic()
        with self.lock:
            due = [key for key in set(self.sessions) | set(self.rebalances) if self._due(key, now)]
        fenced = []
        for gid, mid in sorted(due):
            with self.shard_lock(gid):
                with self.lock:          # a heartbeat may have come in since
                    if not self._due((gid, mid), now):
                        continue
                    g = self.groups.get(gid)
                fenced.append((gid, mid))
                if g is not None and mid in g.members:
                    log.info("group %s: member %s fenced (session or rebalance timeout)", gid, mid)
                    try:
                        self._persisted(gid, lambda: self._fence(g, mid))
                    except GroupError as e:      # not stored: the member stays, fenced at a later check
                        log.warning("group %s: fencing %s not stored: %s", gid, mid, e.message)
                        if e.code == E.NOT_COORDINATOR:      # no longer ours: the log has it for the next leader
                            self.remove_group(gid)
                        continue
                with self.lock:
                    self._cancel(gid, mid)
        return fenced

    def _due(self, key: tuple[str, str], now: float) -> bool:
        """The member's session timeout passed, or its rebalance timeout at the epoch it was asked at."""
        deadline = self.sessions.get(key)
        if deadline is not None and now >= deadline:
            return True
        rebalance = self.rebalances.get(key)
        if rebalance is None or now < rebalance[0]:
            return False
        g = self.groups.get(key[0])
        m = g.members.get(key[1]) if g else None
        return m is not None and m.member_epoch == rebalance[1]

    # -- checks -------------------------------------------------------------------------------
    @staticmethod
    def _check_epoch(m: ConsumerGroupMember, received: int, owned: dict | None) -> None:
        if received > m.member_epoch:
            raise GroupError(FENCED_MEMBER_EPOCH, f"epoch {received} is above the member's {m.member_epoch}")
        if received < m.member_epoch:
            subset = owned is not None and all(p in m.assigned.get(t, ()) for t, ps in owned.items() for p in ps)
            if received != m.previous_member_epoch or not subset:
                raise GroupError(FENCED_MEMBER_EPOCH, f"epoch {received} is below the member's {m.member_epoch}")

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if g is not None:
            return g
        classic = self.classic_members(group_id)
        if classic is not None:
            if not (create and classic == 0):
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
            self.drop_classic(group_id)
        elif not create:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        g = self.groups[group_id] = ConsumerGroup(group_id)
        return g

    # -- join / heartbeat ---------------------------------------------------------------------
    def _member(self, g: ConsumerGroup, r: Heartbeat, member_id: str) -> ConsumerGroupMember:
        join = r.member_epoch == 0
        if r.instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                if not join:
                    raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {g.group_id}")
                return ConsumerGroupMember(member_id)
            self._check_epoch(m, r.member_epoch, r.owned)
            return m
        existing = g.static_member(r.instance_id)
        if join:
            if existing is None:
                return g.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(UNRELEASED_INSTANCE_ID, f"instance {r.instance_id} is still used by "
                                                         f"{existing.member_id}")
            self._cancel(g.group_id, existing.member_id)
            return g.replace_static_member(existing, member_id)
        if existing is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"instance {r.instance_id} is unknown")
        if existing.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"instance {r.instance_id} is held by {existing.member_id}")
        self._check_epoch(existing, r.member_epoch, r.owned)
        return existing

    def _subscription(self, g: ConsumerGroup, updated: ConsumerGroupMember) -> dict:
        topics = self.topics()
        wanted = set()
        for m in list(g.members.values()) + [updated]:
            if m.member_id != updated.member_id or m is updated:
                wanted |= m.subscribed(topics)
        return {t: topics[t] for t in sorted(wanted)}

    def _preferred_assignor(self, g: ConsumerGroup, updated: ConsumerGroupMember):
        asked = Counter(m.server_assignor for mid, m in g.members.items() if mid != updated.member_id)
        asked[updated.server_assignor] += 1
        asked.pop(None, None)
        if asked:
            return self.assignors[max(sorted(asked), key=lambda n: asked[n])]
        return next(iter(self.assignors.values()))

    def preferred_assignor_name(self, g: ConsumerGroup) -> str:
        """The assignor the group's members prefer now (ConsumerGroupDescribe's AssignorName)."""
        asked = Counter(m.server_assignor for m in g.members.values() if m.server_assignor)
        return max(sorted(asked), key=lambda n: asked[n]) if asked else next(iter(self.assignors))

    def _heartbeat(self, r: Heartbeat) -> dict:
        join = r.member_epoch == 0
        g = self._consumer_group(r.group_id, create=join)
        member_id = r.member_id or new_member_id()
        member = self._member(g, r, member_id)
        updated = member.copy()
        if r.instance_id is not None:
            updated.instance_id = r.instance_id
        if r.rack_id is not None:
            updated.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.server_assignor is not None:
            updated.server_assignor = r.server_assignor
        if r.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(r.subscribed_topic_names)))
        if r.subscribed_topic_regex is not None:
            updated.subscribed_topic_regex = r.subscribed_topic_regex or None
        updated.client_id, updated.client_host = r.client_id, r.client_host
        bump = (updated.subscribed_topic_names != member.subscribed_topic_names or
                updated.subscribed_topic_regex != member.subscribed_topic_regex or member.member_id not in g.members)
        subscription = self._subscription(g, updated)
        if subscription != g.subscription:
            g.subscription = subscription
            bump = True
        if bump:
            g.bump_epoch()
            log.info("group %s: epoch %d (member %s)", g.group_id, g.group_epoch, member_id)
        if g.group_epoch > g.assignment_epoch:
            target = (TargetAssignmentBuilder(g.group_id, g.group_epoch, self._preferred_assignor(g, updated))
                      .with_members(g.members).with_subscription_metadata(g.subscription)
                      .with_target_assignment(g.target).add_or_update_member(updated).build())
            g.set_target(g.group_epoch, target)
        target = g.target.get(member_id, {})
        if not updated.is_reconciled_to(g.assignment_epoch):
            before = updated
            updated = (CurrentAssignmentBuilder(updated).with_target_assignment(g.assignment_epoch, target)
                       .with_current_partition_epoch(g.current_partition_epoch)
                       .with_owned_topic_partitions(r.owned).build())
            if updated is not before:
                key = (g.group_id, member_id)
                if updated.state == MemberState.UNREVOKED_PARTITIONS:
                    deadline = self.time.monotonic() + max(updated.rebalance_timeout_ms, 0) / 1000.0
                    self.rebalances[key] = (deadline, updated.member_epoch)
                else:
                    self.rebalances.pop(key, None)
        g.update_member(updated)
        self.sessions[(g.group_id, member_id)] = self.time.monotonic() + self.session_ms(g.group_id) / 1000.0
        full = join or (r.rebalance_timeout_ms != -1 and r.subscribed_topic_names is not None and r.owned is not None)
        out = {"error_code": E.NONE, "error_message": None, "member_id": member_id,
               "member_epoch": updated.member_epoch, "heartbeat_interval_ms": self.heartbeat_ms(g.group_id),
               "assignment": None}
        if full or updated.assigned != member.assigned:
            out["assignment"] = {t: sorted(ps) for t, ps in updated.assigned.items()}
        return out

    # -- leave and fencing --------------------------------------------------------------------
    def _leave(self, r: Heartbeat) -> dict:
        g = self.groups.get(r.group_id)
        if g is None:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {r.group_id} not found.")
        out = {"error_code": E.NONE, "error_message": None, "member_id": r.member_id,
               "member_epoch": r.member_epoch, "heartbeat_interval_ms": 0, "assignment": None}
        if r.instance_id is None:
            self._fence(g, g.member(r.member_id).member_id)
            return out
        m = g.static_member(r.instance_id)
        if m is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"instance {r.instance_id} is unknown")
        if m.member_id != r.member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"instance {r.instance_id} is held by {m.member_id}")
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:     # keeps its partitions for its return
            left = m.copy()
            left.transition_to(m.state, LEAVE_GROUP_STATIC_MEMBER_EPOCH, m.assigned, {})
            g.update_member(left)
            self.rebalances.pop((g.group_id, m.member_id), None)
            return out
        self._fence(g, m.member_id)
        return out

    def _fence(self, g: ConsumerGroup, member_id: str) -> None:
        """Kafka's consumerGroupFenceMember: the member and its partitions go, the group epoch moves on."""
        gone = g.remove_member(member_id)
        self._cancel(g.group_id, member_id)
        if gone is not None:
            topics = self.topics()
            wanted = set()
            for m in g.members.values():
                wanted |= m.subscribed(topics)
            g.subscription = {t: topics[t] for t in sorted(wanted)}
            g.bump_epoch()

    def _cancel(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
        self.rebalances.pop((group_id, member_id), None)


def beside(membership, metadata, time: Time = SYSTEM, store=lambda group, stored: E.NONE,
           **config) -> ConsumerGroupManager:
    """The manager of a GroupCoordinator: topics from its broker's MetadataCache, classic groups from its
    GroupMembership (an empty one of the same id is dropped when a consumer group takes the id)."""
    from eoslab.common.topics import topic_id_uuid

    def topics() -> dict:
        with metadata.lock:
            return {t: (topic_id_uuid(metadata.topic_ids[t]), len(ps)) for t, ps in metadata.partitions.items()
                    if metadata.topic_ids.get(t)}

    def classic_members(group: str) -> int | None:
        with membership.cond:
            g = membership.groups.get(group)
            return None if g is None else len(g.members)

    def drop_classic(group: str) -> None:
        with membership.cond:
            g = membership.groups.get(group)
            if g is not None and not g.members:
                del membership.groups[group]
    return ConsumerGroupManager(topics, time=time, classic_members=classic_members, drop_classic=drop_classic,
                                store=store, **config)
