"""ConsumerGroup (KIP-848): a consumer-protocol group's members, epochs, target assignment and who
holds which partition, and its answers to offset commits and fetches.

Guarantees:
- `group_epoch` only grows; `assignment_epoch` is the epoch of `target` (never above `group_epoch`);
- `partition_epochs` maps each (topic id, partition) a member holds (assigned or pending revocation)
  to that member's epoch; `update_member` refuses (IllegalStateError) a member holding a partition
  another member holds, so a partition is never owned by two members at once;
- the group's state is a ConsumerGroupState (Kafka's Empty, Assigning, Reconciling, Stable) and
  changes only through `transition_to`, which checks VALID_PREVIOUS; `refresh_state` computes it as
  Kafka's maybeUpdateGroupState;
- offset commits and fetches are checked as Kafka's ConsumerGroup.validateOffsetCommit /
  validateOffsetFetch (GroupError with UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH or
  UNSUPPORTED_VERSION for a non-transactional commit below OffsetCommit v9);
- `to_record()` is the group as stored in __consumer_offsets (Kafka's ConsumerGroupMetadata,
  subscription metadata, target assignment and members' records in one value); `from_record` gives
  back a group whose epochs, members, target, subscription and partition epochs equal the stored.
"""
from __future__ import annotations

import enum

from eoslab.common.errors import E
from services.broker.consumer_group_member import (
    FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, UNSUPPORTED_VERSION, ConsumerGroupMember, GroupError, MemberState,
    _topic_id, copy_assignment, decode_assignment, encode_assignment)


class ConsumerGroupState(str, enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"

    def __str__(self) -> str:
        return self.value


_LIVE = frozenset(ConsumerGroupState)
# target -> states it may be entered from: Kafka recomputes the state after every change, from any state
VALID_PREVIOUS = {s: _LIVE for s in ConsumerGroupState}


class IllegalStateError(RuntimeError):
    """The group's bookkeeping would break a guarantee (Kafka: IllegalStateException)."""


class ConsumerGroup:
    protocol_type = "consumer"

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.state = ConsumerGroupState.EMPTY
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}          # instance id -> member id
        self.target: dict[str, dict] = {}                  # member id -> {topic id: partitions}
        self.partition_epochs: dict[tuple, tuple] = {}     # (topic id, partition) -> (holder, its epoch)
        self.subscription: dict[str, tuple] = {}           # topic name -> (topic id, partitions)

    # -- state ---------------------------------------------------------------------------------
    def transition_to(self, target: ConsumerGroupState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateError(f"group {self.group_id}: {self.state} -> {target}")
        self.state = target

    def refresh_state(self) -> None:
        if not self.members:
            s = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            s = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()
                 if m.member_epoch >= 0):
            s = ConsumerGroupState.RECONCILING
        else:
            s = ConsumerGroupState.STABLE
        if s != self.state:
            self.transition_to(s)

    def is_empty(self) -> bool:
        return not self.members

    # -- members -------------------------------------------------------------------------------
    def member(self, member_id: str) -> ConsumerGroupMember:
        """Kafka's getOrMaybeCreateMember(memberId, false)."""
        m = self.members.get(member_id)
        if m is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {self.group_id}")
        return m

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        mid = self.static_members.get(instance_id) if instance_id else None
        return self.members.get(mid) if mid else None

    def current_partition_epoch(self, topic_id, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), ("", -1))[1]

    def _held(self, m: ConsumerGroupMember):
        for part in (m.assigned, m.pending_revocation):
            for t, ps in part.items():
                for p in ps:
                    yield (t, p)

    def update_member(self, m: ConsumerGroupMember) -> None:
        """Install the member's new version and its partition epochs."""
        taken = [tp for tp in self._held(m) if self.partition_epochs.get(tp, (m.member_id,))[0] != m.member_id]
        if taken:
            raise IllegalStateError(f"group {self.group_id}: {taken} held by another member")
        self._release(m.member_id)
        for tp in self._held(m):
            self.partition_epochs[tp] = (m.member_id, m.member_epoch)
        self.members[m.member_id] = m
        if m.instance_id:
            self.static_members[m.instance_id] = m.member_id
        self.refresh_state()

    def _release(self, member_id: str) -> None:
        for tp in [tp for tp, (holder, _) in self.partition_epochs.items() if holder == member_id]:
            del self.partition_epochs[tp]

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self._release(member_id)
            if m.instance_id and self.static_members.get(m.instance_id) == member_id:
                del self.static_members[m.instance_id]
            self.target.pop(member_id, None)
        self.refresh_state()
        return m

    def replace_static_member(self, old: ConsumerGroupMember, new_id: str) -> ConsumerGroupMember:
        """A static member back with a new member id: it takes the old one's place, assignment and target
        at epoch 0 (Kafka's replaceMember)."""
        target = self.target.get(old.member_id, {})
        self.remove_member(old.member_id)
        new = old.copy()
        new.member_id, new.member_epoch, new.previous_member_epoch = new_id, 0, 0
        new.state = MemberState.STABLE
        new.pending_revocation = {}
        self.update_member(new)
        self.target[new_id] = copy_assignment(target)
        return new

    def set_target(self, epoch: int, target: dict) -> None:
        self.target = {m: copy_assignment(a) for m, a in target.items()}
        self.assignment_epoch = epoch
        self.refresh_state()

    def bump_epoch(self) -> int:
        self.group_epoch += 1
        self.refresh_state()
        return self.group_epoch

    # -- stored form ---------------------------------------------------------------------------
    def to_record(self) -> dict:
        return {"state": self.state.value, "epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
                "subscription": [[t, str(tid), n] for t, (tid, n) in sorted(self.subscription.items())],
                "target": [[m, encode_assignment(a)] for m, a in sorted(self.target.items())],
                "members": [m.to_record() for m in self.members.values()]}

    @classmethod
    def from_record(cls, group_id: str, d: dict) -> "ConsumerGroup":
        """The stored group, as it was: loaded, not a transition (its state is the stored one)."""
        g = cls(group_id)
        g.group_epoch, g.assignment_epoch = int(d["epoch"]), int(d["assignment_epoch"])
        g.subscription = {t: (_topic_id(tid), n) for t, tid, n in d.get("subscription", [])}
        g.target = {m: decode_assignment(a) for m, a in d.get("target", [])}
        for md in d.get("members", []):
            m = ConsumerGroupMember.from_record(md)
            g.members[m.member_id] = m
            if m.instance_id:
                g.static_members[m.instance_id] = m.member_id
            for tp in g._held(m):
                g.partition_epochs[tp] = (m.member_id, m.member_epoch)
        g.state = ConsumerGroupState(d.get("state", ConsumerGroupState.EMPTY.value))
        return g

    # -- offsets -------------------------------------------------------------------------------
    @staticmethod
    def _check_epoch(received: int, expected: int) -> None:
        if received > expected:
            raise GroupError(FENCED_MEMBER_EPOCH, f"member epoch {received} is above the group's {expected}")
        if received < expected:
            raise GroupError(STALE_MEMBER_EPOCH, f"member epoch {received} is below the group's {expected}")

    def validate_offset_commit(self, member_id: str, member_epoch: int, transactional: bool,
                               api_version: int) -> None:
        if member_epoch < 0 and not self.members:
            return
        m = self.member(member_id)
        if not transactional and api_version < 9:
            raise GroupError(UNSUPPORTED_VERSION, "OffsetCommit v9 or above must be used by consumer-protocol "
                                                  "members")
        self._check_epoch(member_epoch, m.member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        self._check_epoch(member_epoch, self.member(member_id or "").member_epoch)
