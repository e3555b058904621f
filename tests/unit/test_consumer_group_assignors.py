"""The consumer group protocol's server-side assignors (services.broker.consumer_group_assignors):
every subscribed partition to exactly one subscriber, UniformAssignor balanced and sticky,
RangeAssignor's contiguous ranges in member id order."""
import uuid

import pytest

from services.broker.consumer_group_assignors import RangeAssignor, UniformAssignor, assignors

pytestmark = pytest.mark.fast
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def owners(result):
    seen = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} given to {seen[(t, p)]} and {m}"
                seen[(t, p)] = m
    return seen


def counts(result):
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def test_uniform_gives_every_partition_once_and_balances():
    r = UniformAssignor().assign({"a": ({T1, T2}, {}), "b": ({T1, T2}, {}), "c": ({T1, T2}, {})}, {T1: 4, T2: 3})
    assert len(owners(r)) == 7 and counts(r) == [2, 2, 3]


def test_uniform_is_sticky_a_newcomer_takes_only_what_balance_needs():
    first = UniformAssignor().assign({"a": ({T1}, {}), "b": ({T1}, {})}, {T1: 6})
    second = UniformAssignor().assign({"a": ({T1}, first["a"]), "b": ({T1}, first["b"]), "c": ({T1}, {})},
                                      {T1: 6})
    assert counts(second) == [2, 2, 2]
    assert second["a"][T1] <= first["a"][T1] and second["b"][T1] <= first["b"][T1]   # nothing moved between a, b


def test_uniform_with_different_subscriptions_gives_a_topic_only_to_its_subscribers():
    r = UniformAssignor().assign({"a": ({T1}, {}), "b": ({T1, T2}, {})}, {T1: 2, T2: 2})
    o = owners(r)
    assert {o[(T2, 0)], o[(T2, 1)]} == {"b"} and len(o) == 4 and counts(r) == [2, 2]


def test_a_topic_nobody_subscribes_to_is_not_assigned():
    r = UniformAssignor().assign({"a": ({T1}, {})}, {T1: 1, T2: 5})
    assert r == {"a": {T1: {0}}}


def test_range_gives_contiguous_ranges_the_first_members_one_more():
    r = RangeAssignor().assign({"b": ({T1}, {}), "a": ({T1}, {})}, {T1: 5})
    assert r == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}}


def test_assignors_are_named_as_kafka_s_config_and_an_unknown_name_is_refused():
    assert list(assignors()) == ["uniform", "range"]
    with pytest.raises(ValueError):
        assignors(("uniform", "sticky"))
