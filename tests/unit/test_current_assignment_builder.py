"""CurrentAssignmentBuilder (services.broker.current_assignment_builder): the member moves toward its
target one step at a time; partitions to give up are pending revocation until the member's heartbeat no
longer owns them, and partitions another member still holds are not given (UNRELEASED_PARTITIONS)."""
import uuid

import pytest

from services.broker.consumer_group_member import (
    ConsumerGroupMember, GroupError, IllegalMemberTransition, MemberState)
from services.broker.current_assignment_builder import CurrentAssignmentBuilder

pytestmark = pytest.mark.fast
T = uuid.UUID(int=7)


def member(epoch, assigned, state=MemberState.STABLE, pending=None):
    m = ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1)
    m.state, m.assigned, m.pending_revocation = state, {T: set(assigned)} if assigned else {}, pending or {}
    return m


def step(m, epoch, target, owned, held=()):
    return (CurrentAssignmentBuilder(m).with_target_assignment(epoch, {T: set(target)})
            .with_current_partition_epoch(lambda t, p: 5 if p in held else -1)
            .with_owned_topic_partitions(None if owned is None else {T: list(owned)}).build())


def test_a_stable_member_at_the_target_epoch_is_left_as_it_is():
    m = member(3, [0, 1])
    assert step(m, 3, [0], [0, 1]) is m


def test_a_partition_to_give_up_is_pending_revocation_at_the_same_epoch():
    m = step(member(3, [0, 1]), 4, [0], [0, 1])
    assert (m.state, m.member_epoch, m.assigned, m.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 3, {T: {0}}, {T: {1}})


def test_the_member_moves_on_only_when_its_heartbeat_no_longer_owns_the_revoked_partition():
    m = step(member(3, [0, 1]), 4, [0], [0, 1])
    assert step(m, 4, [0], [0, 1]) is m                   # still owns 1
    assert step(m, 4, [0], None) is m                     # said nothing: counts as still owning
    done = step(m, 4, [0], [0])
    assert (done.state, done.member_epoch, done.previous_member_epoch, done.assigned) == (
        MemberState.STABLE, 4, 3, {T: {0}})


def test_a_partition_another_member_still_holds_is_not_given_until_it_is_released():
    m = step(member(3, [0]), 4, [0, 1], [0], held={1})
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.UNRELEASED_PARTITIONS, 4, {T: {0}})
    m = step(m, 4, [0, 1], [0])
    assert (m.state, m.assigned) == (MemberState.STABLE, {T: {0, 1}})


def test_an_unknown_state_with_owned_partitions_is_fenced():
    m = member(3, [0], state=MemberState.UNKNOWN)
    with pytest.raises(GroupError) as e:
        step(m, 4, [0], [0])
    assert e.value.code == 110                            # FENCED_MEMBER_EPOCH


def test_no_state_may_be_entered_into_unknown():
    with pytest.raises(IllegalMemberTransition):
        member(1, [0]).transition_to(MemberState.UNKNOWN, 1, {}, {})
