"""CurrentAssignmentBuilder (KIP-848): moves one member's current assignment toward its target, one
step per heartbeat, so that a partition is never owned by two members at once.

Guarantees (Kafka's CurrentAssignmentBuilder):
- a member keeps the partitions of its current assignment that are also in its target;
- a partition it must give up is first *pending revocation*: the member stays at its epoch in
  UNREVOKED_PARTITIONS until a heartbeat's owned partitions no longer contain any of them (a heartbeat
  without owned partitions counts as still owning them), and only then moves to the next epoch;
- a partition of its target that another member still holds (its partition epoch is not -1) is not
  given: the member is UNRELEASED_PARTITIONS and gets it on a later heartbeat once it is free;
- otherwise the member is STABLE at the target epoch with its whole target.
`currentPartitionEpoch(topic id, partition)` is the group's view: -1 when no member holds the partition.
"""
from __future__ import annotations

from typing import Callable

from services.broker.consumer_group_member import (
    FENCED_MEMBER_EPOCH, Assignment, ConsumerGroupMember, GroupError, MemberState)


class CurrentAssignmentBuilder:
    def __init__(self, member: ConsumerGroupMember):
        self.member = member
        self.target_epoch = 0
        self.target: Assignment = {}
        self.partition_epoch: Callable[[object, int], int] = lambda t, p: -1
        self.owned: dict | None = None   # topic id -> partitions the heartbeat says it owns; None: not told

    def with_target_assignment(self, epoch: int, target: Assignment) -> "CurrentAssignmentBuilder":
        self.target_epoch, self.target = epoch, target
        return self

    def with_current_partition_epoch(self, fn) -> "CurrentAssignmentBuilder":
        self.partition_epoch = fn
        return self

    def with_owned_topic_partitions(self, owned: dict | None) -> "CurrentAssignmentBuilder":
        self.owned = owned
        return self

    def build(self) -> ConsumerGroupMember:
        """A new member (the given one is not changed) one reconciliation step further."""
        m = self.member
        if m.state == MemberState.STABLE:
            if m.member_epoch == self.target_epoch:
                return m
            return self._next(m.member_epoch, m.assigned)
        if m.state == MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(m.pending_revocation):
                return m
            return self._next(m.member_epoch + 1, m.assigned)
        if m.state == MemberState.UNRELEASED_PARTITIONS:
            return self._next(m.member_epoch, m.assigned)
        if self.owned is None or any(self.owned.values()):
            raise GroupError(FENCED_MEMBER_EPOCH, "the member is in an unknown state: it must rejoin")
        return self._next(self.target_epoch, m.assigned)

    def _owns_any(self, partitions: Assignment) -> bool:
        if self.owned is None:
            return True
        return any(p in partitions.get(t, ()) for t, ps in self.owned.items() for p in ps)

    def _next(self, epoch: int, current: Assignment) -> ConsumerGroupMember:
        keep, revoke, add = {}, {}, {}
        unreleased = False
        for t in set(self.target) | set(current):
            target, had = self.target.get(t, set()), current.get(t, set())
            kept = had & target
            gone = had - kept
            wanted = target - kept
            free = {p for p in wanted if self.partition_epoch(t, p) == -1}
            unreleased = unreleased or free != wanted
            if kept:
                keep[t] = kept
            if gone:
                revoke[t] = gone
            if free:
                add[t] = free
        out = self.member.copy()
        if revoke and self._owns_any(revoke):
            out.transition_to(MemberState.UNREVOKED_PARTITIONS, epoch, keep, revoke)
            return out
        for t, ps in add.items():
            keep.setdefault(t, set()).update(ps)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        out.transition_to(state, self.target_epoch, keep, {})
        return out
