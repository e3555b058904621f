"""TargetAssignmentBuilder (KIP-848): the target assignment of a consumer group at a new group epoch,
computed by the group's server-side assignor from its members' subscriptions.

Guarantees: the target lists every member of the group as it will be after the heartbeat being
served (the member that heartbeats added or updated, a member it replaces removed), each with the
partitions of the subscribed topics the assignor gives it; a member's previous target is handed to
the assignor so a sticky one can keep it. Subscriptions are resolved against `subscription`
(topic name -> (topic id, partition count)): a topic that does not exist is not assigned.
"""
from __future__ import annotations

from services.broker.consumer_group_member import ConsumerGroupMember


class TargetAssignmentBuilder:
    def __init__(self, group_id: str, group_epoch: int, assignor):
        self.group_id, self.group_epoch, self.assignor = group_id, group_epoch, assignor
        self.members: dict[str, ConsumerGroupMember] = {}
        self.subscription: dict[str, tuple] = {}
        self.previous: dict[str, dict] = {}

    def with_members(self, members: dict) -> "TargetAssignmentBuilder":
        self.members = dict(members)
        return self

    def with_subscription_metadata(self, subscription: dict) -> "TargetAssignmentBuilder":
        self.subscription = subscription
        return self

    def with_target_assignment(self, previous: dict) -> "TargetAssignmentBuilder":
        self.previous = previous
        return self

    def add_or_update_member(self, member: ConsumerGroupMember) -> "TargetAssignmentBuilder":
        self.members[member.member_id] = member
        return self

    def remove_member(self, member_id: str) -> "TargetAssignmentBuilder":
        self.members.pop(member_id, None)
        return self

    def build(self) -> dict[str, dict]:
        """member id -> {topic id: partitions}."""
        names = set(self.subscription)
        topics = {tid: n for tid, n in self.subscription.values()}
        spec = {}
        for mid, m in self.members.items():
            subscribed = {self.subscription[t][0] for t in m.subscribed(names)}
            spec[mid] = (subscribed, self.previous.get(mid, {}))
        return self.assignor.assign(spec, topics)
