"""A ConsumerGroupHeartbeat request's fields and Kafka's checks of them before anything changes.

Guarantees: `validate(r, assignors)` raises GroupError with Kafka's code and message
(throwIfConsumerGroupHeartbeatRequestIsInvalid) for a request no group may accept: INVALID_REQUEST
for a missing group id, an empty instance or rack id, a member id missing where the epoch needs one
(on a join only from v1, KIP-1082, where the client brings its own), a first request without a
rebalance timeout or subscription or with owned partitions, or an epoch that is not 0, -1, -2 or
above 0; INVALID_REGULAR_EXPRESSION for a regex that does not compile; UNSUPPORTED_ASSIGNOR for a
server assignor the broker is not configured with. It reads nothing but the request.
"""
from __future__ import annotations

import dataclasses
import re

from eoslab.common.errors import E
from services.broker.consumer_group_member import (
    INVALID_REGULAR_EXPRESSION, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR,
    GroupError)

CLIENT_MEMBER_ID_VERSION = 1          # KIP-1082: from v1 the client generates its member id


@dataclasses.dataclass
class Heartbeat:
    """A ConsumerGroupHeartbeat's fields; None is Kafka's "not changed since the last heartbeat"."""
    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict | None = None            # topic id -> partitions
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0


def validate(r: Heartbeat, assignors) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid; `assignors`: the configured names."""
    def invalid(msg):
        raise GroupError(E.INVALID_REQUEST, msg)
    if not r.group_id:
        invalid("GroupId can't be empty.")
    if r.instance_id == "":
        invalid("InstanceId can't be empty.")
    if r.rack_id == "":
        invalid("RackId can't be empty.")
    if r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not r.member_id:
            invalid("MemberId can't be empty.")
    elif r.member_epoch == 0:
        if not r.member_id and r.api_version >= CLIENT_MEMBER_ID_VERSION:
            invalid("MemberId can't be empty.")
        if r.rebalance_timeout_ms == -1:
            invalid("RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or any(r.owned.values()):
            invalid("TopicPartitions must be empty when (re-)joining.")
        if not r.subscribed_topic_names and not r.subscribed_topic_regex:
            invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not r.member_id:
            invalid("MemberId can't be empty.")
        if r.instance_id is None:
            invalid("InstanceId can't be null.")
    else:
        invalid("MemberEpoch is invalid.")
    if r.subscribed_topic_regex is not None:
        try:
            re.compile(r.subscribed_topic_regex)
        except re.error as e:
            raise GroupError(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is invalid: {e}") from None
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise GroupError(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {r.server_assignor} is not supported. "
                                               f"Supported assignors: {', '.join(assignors)}.")
