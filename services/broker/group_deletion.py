"""DeleteGroups and OffsetDelete at the group coordinator, as Kafka's GroupCoordinatorShard.deleteGroups and
OffsetMetadataManager.deleteOffsets decide them (with ClassicGroup's and ConsumerGroup's validateDeleteGroup,
validateOffsetDelete and isSubscribedToTopic).

Guarantees:
- a group whose __consumer_offsets partition this broker does not lead is NOT_COORDINATOR (the
  coordinator's loading error while it loads); a group the coordinator does not know (no members, no
  stored record, no committed or pending offset) is GROUP_ID_NOT_FOUND;
- DeleteGroups: a group with members (a classic group rebalancing or Stable, a consumer group that is not
  Empty) is NON_EMPTY_GROUP; for an empty one a tombstone of each committed or pending offset and of the
  group's record is appended in one batch and replicated to the ISR before the answer; the group is
  then gone: not listed, described as Dead, no offsets fetched, and a coordinator that loads the
  partition later replays the tombstones. A write that fails answers the coordinator's error
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) and nothing is forgotten;
- OffsetDelete: a classic group with members whose protocol type is not "consumer" is NON_EMPTY_GROUP for
  the whole request; each partition of a topic the group subscribes to (a member's subscription) is
  GROUP_SUBSCRIBED_TO_TOPIC; every other partition named is answered without an error, and a tombstone
  is written for each that has a committed or pending offset (acks=all, one batch).
A classic group's emptiness is checked and the group taken out of the membership in one step under the
membership's lock, so a JoinGroup that comes meanwhile starts a new group; a consumer group is checked,
written and forgotten under its shard's lock, as its heartbeats are.
"""
from __future__ import annotations

from eoslab.common.errors import E
from services.broker.group_coordinator import store_error
from services.broker.group_protocols import CONSUMER
from services.broker.offsets_partition_state import _consumer_group_key, _key, _meta_key


def delete_groups(gc, group_ids: list[str]) -> list[tuple[str, int]]:
    """(group id, error) for each group, in the order asked."""
    return [(g, _delete_group(gc, g)) for g in group_ids]


def _delete_group(gc, group: str) -> int:
    err, p, st = gc.partition_state(group)
    if err != E.NONE:
        return err
    with gc.lock:                                  # the coordinator's lock is never taken under the others
        in_log, tps = st.knows(group), sorted(st.offset_keys(group))
    with gc.consumer_groups.shard_lock(group):
        modern = gc.consumer_groups.group(group)
        if modern is not None and not modern.is_empty():
            return E.NON_EMPTY_GROUP
        with gc.membership.cond:
            classic = gc.membership.groups.get(group)
            if classic is not None and classic.members:
                return E.NON_EMPTY_GROUP
            if classic is None and modern is None and not in_log:
                return E.GROUP_ID_NOT_FOUND
            gc.membership.groups.pop(group, None)      # a join from now on starts a new group
        records = [(_key(group, t, n), None, 0) for t, n in tps] + [(_meta_key(group), None, 0)]
        if modern is not None or in_log and st.consumer_groups.get(group) is not None:
            records.append((_consumer_group_key(group), None, 0))
        err = gc._append(p, records)
        if err != E.NONE:
            if classic is not None:
                with gc.membership.cond:
                    gc.membership.groups.setdefault(group, classic)
            return store_error(err)
        if modern is not None:
            gc.consumer_groups.remove_group(group)
    with gc.lock:
        for tp in tps:
            st.remove_offset(group, tp)
        st.stored_group(group, None, consumer=False)
        st.stored_group(group, None, consumer=True)
        gc.unstable_fetches.pop(group, None)
    return E.NONE


def _subscribed(classic, modern) -> set[str] | None:
    """The topics the group's members subscribe to; None: every topic (unknown subscriptions)."""
    out: set[str] = set()
    if classic is not None:
        for m in classic.members.values():
            out |= set(m.topics)
    if modern is not None:
        for m in modern.members.values():
            out |= set(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                return None                      # matched per topic below
    return out


def delete_offsets(gc, group: str, topics: list[tuple[str, list[int]]]) -> tuple[int, list]:
    """(top-level error, [(topic, [(partition, error)])]) for one OffsetDelete."""
    err, p, st = gc.partition_state(group)
    if err != E.NONE:
        return err, []
    with gc.lock:                                  # the coordinator's lock is never taken under the others
        in_log, have = st.knows(group), st.offset_keys(group)
    with gc.consumer_groups.shard_lock(group):
        modern = gc.consumer_groups.group(group)
        with gc.membership.cond:
            classic = gc.membership.groups.get(group)
            if classic is None and modern is None and not in_log:
                return E.GROUP_ID_NOT_FOUND, []
            if classic is not None and classic.members and classic.protocol_type != CONSUMER:
                return E.NON_EMPTY_GROUP, []
            subscribed = _subscribed(classic, modern)

        def is_subscribed(topic: str) -> bool:
            if subscribed is None:
                return any(m.subscribed({topic}) for m in modern.members.values())
            return topic in subscribed
        answer, tombstones = [], set()
        for topic, partitions in topics:
            if is_subscribed(topic):
                answer.append((topic, [(n, E.GROUP_SUBSCRIBED_TO_TOPIC) for n in partitions]))
                continue
            answer.append((topic, [(n, E.NONE) for n in partitions]))
            tombstones |= {(topic, n) for n in partitions if (topic, n) in have}
        if tombstones:
            err = gc._append(p, [(_key(group, t, n), None, 0) for t, n in sorted(tombstones)])
            if err != E.NONE:
                return store_error(err), []
    with gc.lock:
        for tp in tombstones:
            st.remove_offset(group, tp)
    return E.NONE, answer
