"""ClassicGroup's state and members (Kafka's ClassicGroup / GroupMetadata): the group states, each
with the states it may be entered from, and the one method every state change goes through.

Guarantees: a group's state is a GroupState (Kafka's Empty, PreparingRebalance, CompletingRebalance,
Stable) and changes only through Group.transition_to, which refuses (IllegalGroupTransition) a change
its target does not list in VALID_PREVIOUS. A static member (KIP-345) is a member with a group
instance id; a group holds at most one member per instance id (`static_member`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class GroupState(str, enum.Enum):
    """Kafka's classic group states (GroupMetadata.scala); the value is what __consumer_offsets stores."""
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"

    def __str__(self) -> str:
        return self.value


EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
# target -> the states it may be entered from (Kafka's GroupState.validPreviousStates). A group whose last
# member leaves or expires goes through PreparingRebalance to Empty, as Kafka's does.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    EMPTY: frozenset({PREPARING}),
}


class IllegalGroupTransition(RuntimeError):
    """A transition its target does not allow from the group's state (Kafka: IllegalStateException)."""


@dataclass
class Member:
    member_id: str
    topics: list[str]
    session_timeout: float
    rebalance_timeout: float
    last_heartbeat: float
    joined: bool = False           # rejoined for the rebalance under way
    awaiting_sync: bool = False    # in SyncGroup, waiting for the leader's assignment
    assignment: list = field(default_factory=list)
    protocols: list = field(default_factory=list)   # (name, metadata) offered, most preferred first
    assignment_bytes: bytes | None = None          # the leader's bytes for this member, untouched
    client_id: str = ""                            # the Kafka request header's (DescribeGroups shows it)
    group_instance_id: str = ""                    # KIP-345: a static member's instance id


@dataclass
class Group:
    group_id: str
    state: GroupState = EMPTY
    protocol_type: str = ""
    protocol: str = ""             # chosen when a generation forms (group_protocols.select)
    generation: int = 0
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    synced_generation: int = -1

    def static_member(self, instance: str) -> str | None:
        """The member id that holds a group instance id now (None: no member holds it)."""
        return next((m.member_id for m in self.members.values() if instance and m.group_instance_id == instance),
                    None)

    def fenced(self, instance: str, member_id: str) -> bool:
        """Kafka's isStaticMemberFenced: another member holds this instance id now."""
        holder = self.static_member(instance)
        return holder is not None and holder != member_id

    def transition_to(self, target: GroupState) -> None:
        """The one way a group's state changes (Kafka's GroupMetadata.transitionTo)."""
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state} -> {target} is not a valid "
                                         f"transition (from {', '.join(sorted(map(str, VALID_PREVIOUS[target])))})")
        self.state = target

    def become_empty(self) -> None:
        """No members left: through PreparingRebalance to Empty, a new generation, no leader."""
        if self.state != PREPARING:
            self.transition_to(PREPARING)
        self.transition_to(EMPTY)
        self.leader = ""
        self.generation += 1
