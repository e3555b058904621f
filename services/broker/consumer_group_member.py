"""ConsumerGroupMember (KIP-848): one member of a consumer-protocol group, its epochs, its subscription
and its current assignment, with the reconciliation state it is in (Kafka's MemberState).

Guarantees: a member's state is a MemberState and changes only through `transition_to`, which refuses
(IllegalMemberTransition) a change its target does not list in VALID_PREVIOUS. `assigned` and
`pending_revocation` map a topic id to partition numbers; a partition is in at most one of them.
`previous_member_epoch` is the epoch before the last change of `member_epoch` (Kafka accepts a
heartbeat at that epoch when the owned partitions are a subset of the assignment: the answer that
bumped the epoch may have been lost). Kafka's error codes the consumer protocol adds are named here.
`to_record` / `from_record` are the member as stored in __consumer_offsets (Kafka's
ConsumerGroupMemberMetadata and ConsumerGroupCurrentMemberAssignment values in one): a member read back
equals the one stored (epochs, state, assignment, pending revocation, subscription, client).
"""
from __future__ import annotations

import dataclasses
import enum
import uuid

# Kafka's error codes of KIP-848 (org.apache.kafka.common.protocol.Errors), not in the lab's gRPC enum
UNSUPPORTED_VERSION = 35
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128

LEAVE_GROUP_MEMBER_EPOCH = -1          # a member leaving
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2   # a static member leaving for now, to come back with its instance id

Assignment = dict  # topic id (uuid.UUID) -> set of partition numbers


class MemberState(str, enum.Enum):
    """Kafka's MemberState of a consumer group member."""
    STABLE = "stable"                                  # has its target assignment (or all it can have)
    UNREVOKED_PARTITIONS = "unrevoked_partitions"      # must give partitions up before its next epoch
    UNRELEASED_PARTITIONS = "unreleased_partitions"    # waits for partitions another member still holds
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


ALL_STATES = frozenset(MemberState)
# target -> the states it may be entered from: reconciliation moves between any two of the known states
VALID_PREVIOUS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.STABLE: ALL_STATES,
    MemberState.UNREVOKED_PARTITIONS: ALL_STATES,
    MemberState.UNRELEASED_PARTITIONS: ALL_STATES,
    MemberState.UNKNOWN: frozenset(),
}


class IllegalMemberTransition(RuntimeError):
    """A member state change its target does not allow (Kafka: IllegalStateException)."""


class GroupError(Exception):
    """A request refused with one of Kafka's error codes (an ApiException in Kafka)."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message or str(code))
        self.code, self.message = code, message


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def encode_assignment(a: Assignment) -> list:
    """An assignment as stored: [[topic id as text, sorted partitions], ...] sorted by topic id."""
    return sorted([str(t), sorted(ps)] for t, ps in a.items() if ps)


def _topic_id(text: str):
    try:
        return uuid.UUID(text)
    except ValueError:
        return text              # a topic id that is not a UUID (the unit tests' names)


def decode_assignment(stored: list) -> Assignment:
    return {_topic_id(t): set(ps) for t, ps in stored if ps}


def new_member_id() -> str:
    """A member id as Kafka makes one (Uuid.randomUuid().toString(): 22 URL-safe base64 characters)."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclasses.dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = dataclasses.field(default_factory=dict)
    pending_revocation: Assignment = dataclasses.field(default_factory=dict)

    def transition_to(self, target: MemberState, epoch: int, assigned: Assignment,
                      pending_revocation: Assignment) -> None:
        """The one way a member's state, epoch and current assignment change together."""
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalMemberTransition(f"member {self.member_id}: {self.state} -> {target}")
        if epoch != self.member_epoch:
            self.previous_member_epoch = self.member_epoch
            self.member_epoch = epoch
        self.state = target
        self.assigned = copy_assignment(assigned)
        self.pending_revocation = copy_assignment(pending_revocation)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def subscribed(self, topic_names) -> set[str]:
        """The topic names of `topic_names` this member subscribes to (by name or by its regex)."""
        out = {t for t in self.subscribed_topic_names if t in topic_names}
        if self.subscribed_topic_regex:
            import re
            try:
                pattern = re.compile(self.subscribed_topic_regex)
            except re.error:
                return out
            out |= {t for t in topic_names if pattern.fullmatch(t)}
        return out

    def copy(self) -> "ConsumerGroupMember":
        c = dataclasses.replace(self)
        c.assigned, c.pending_revocation = copy_assignment(self.assigned), copy_assignment(self.pending_revocation)
        return c

    def to_record(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["subscribed_topic_names"] = list(self.subscribed_topic_names)
        d["state"] = self.state.value
        d["assigned"], d["pending_revocation"] = encode_assignment(self.assigned), \
            encode_assignment(self.pending_revocation)
        return d

    @classmethod
    def from_record(cls, d: dict) -> "ConsumerGroupMember":
        names = {f.name for f in dataclasses.fields(cls)}
        m = cls(**{k: v for k, v in d.items() if k in names})
        m.subscribed_topic_names = tuple(d.get("subscribed_topic_names", ()))
        m.state = MemberState(d.get("state", MemberState.STABLE.value))
        m.assigned = decode_assignment(d.get("assigned", []))
        m.pending_revocation = decode_assignment(d.get("pending_revocation", []))
        return m
