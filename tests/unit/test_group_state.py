"""The consumer group's state machine (services.broker.classic_group): Kafka's states and valid previous states,
one transition method, and a group that loses its last member going through PreparingRebalance to Empty."""
import pytest

from services.broker.classic_group import (COMPLETING, EMPTY, PREPARING, STABLE, VALID_PREVIOUS, Group,
                                           IllegalGroupTransition)

pytestmark = pytest.mark.fast


def test_kafka_transitions_are_allowed_in_order():
    g = Group("g")
    for target in (PREPARING, COMPLETING, STABLE, PREPARING, EMPTY):
        g.transition_to(target)
        assert g.state is target


@pytest.mark.parametrize("source,target", [(EMPTY, STABLE), (EMPTY, COMPLETING), (STABLE, EMPTY),
                                           (PREPARING, STABLE), (COMPLETING, EMPTY), (STABLE, COMPLETING)])
def test_a_change_kafka_forbids_is_refused_and_leaves_the_state(source, target):
    g = Group("g", state=source)
    with pytest.raises(IllegalGroupTransition) as e:
        g.transition_to(target)
    assert g.state is source and str(source) in str(e.value) and str(target) in str(e.value)


def test_every_state_is_reachable_and_values_are_kafkas_names():
    assert set(VALID_PREVIOUS) == {EMPTY, PREPARING, COMPLETING, STABLE}
    assert [str(s) for s in (EMPTY, PREPARING, COMPLETING, STABLE)] == \
        ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"]
    assert STABLE == "Stable"          # what __consumer_offsets stores and loads


@pytest.mark.parametrize("source", [STABLE, COMPLETING, PREPARING])
def test_the_last_member_gone_empties_the_group_through_preparing(source):
    g = Group("g", state=source, generation=4, leader="m1")
    g.become_empty()
    assert (g.state, g.leader, g.generation) == (EMPTY, "", 5)
