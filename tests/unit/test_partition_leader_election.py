"""The controller's choice of leader and ISR after broker loss, and its checks of a new topic."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.controller.context import LeaderIsr
from services.controller.partition_leader_election import ElectionRules, partition_change
from services.controller.topic_creation import TopicRefused, check_new_topic, manual_assignment

pytestmark = pytest.mark.fast


def st(leader, epoch, isr, elr=(), last_known=()):
    return LeaderIsr(leader, epoch, list(isr), 1, 0, list(elr), list(last_known))


def after_loss(state, live, unclean=False, replicas=(1, 2, 3)):
    """The old function's view (ZooKeeper-mode rules): (leader, epoch, isr) or None."""
    new = partition_change(state, list(replicas), set(live), ElectionRules(unclean_allowed=unclean))
    return None if new is None else (new.leader, new.leader_epoch, new.isr)


def test_a_live_leader_keeps_leading_and_its_epoch_when_only_its_isr_shrinks():
    assert after_loss(st(1, 4, [1, 2, 3]), {1, 2}) == (1, 4, [1, 2])
    assert after_loss(st(1, 4, [1, 2]), {1, 2}) is None


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_a_new_epoch():
    assert after_loss(st(1, 4, [1, 3, 2]), {2, 3}) == (3, 5, [3, 2])


def test_with_no_live_isr_member_the_partition_waits_unless_unclean_election_is_allowed():
    # clean: no leader, the last ISR kept for a clean election when 1 returns
    assert after_loss(st(1, 4, [1]), {2, 3}) == (-1, 5, [1])
    assert after_loss(st(-1, 5, [1]), {2, 3}) is None
    # unclean: an out-of-sync replica leads, alone in the ISR
    assert after_loss(st(1, 4, [1]), {2, 3}, unclean=True) == (2, 5, [2])


ELR = ElectionRules(elr_enabled=True, min_isr=2)


def test_elr_replicas_that_leave_an_isr_below_min_insync_become_eligible_and_are_cleared_at_min():
    shrunk = partition_change(st(1, 4, [1, 2, 3]), [1, 2, 3], {1, 2, 3}, ELR, target_isr=[1])
    assert (shrunk.leader, shrunk.leader_epoch, shrunk.isr, shrunk.elr) == (1, 4, [1], [2, 3])
    # at min.insync.replicas again the ELR is empty
    grown = partition_change(shrunk, [1, 2, 3], {1, 2, 3}, ELR, target_isr=[1, 2])
    assert (grown.isr, grown.elr) == ([1, 2], [])
    # a shrink that stays at min.insync.replicas keeps no ELR
    assert partition_change(st(1, 4, [1, 2, 3]), [1, 2, 3], {1, 2, 3}, ELR, target_isr=[1, 2]).elr == []


def test_elr_when_the_last_isr_member_dies_a_live_eligible_replica_leads_not_the_lone_isr_member():
    # ISR {1} after 2 and 3 left it; 1 dies while 2 is alive: the ISR empties, 2 leads from the ELR
    state = st(1, 4, [1], elr=[2, 3])
    new = partition_change(state, [1, 2, 3], {2}, ELR)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, [2])
    assert new.elr == [1, 3] and new.last_known_elr == []
    # before KIP-966 the partition waits for 1 (the only ISR member), whatever its disk lost
    assert after_loss(st(1, 4, [1]), {2}) == (-1, 5, [1])


def test_elr_a_broker_back_from_an_unclean_shutdown_leaves_the_isr_and_elr_and_is_not_elected():
    # 1 was the last ISR member and died; nobody else is alive yet: no leader, ISR empty, 1 remembered
    waiting = partition_change(st(1, 4, [1], elr=[2, 3]), [1, 2, 3], set(), ELR)
    assert (waiting.leader, waiting.isr, waiting.elr, waiting.last_known_elr) == (-1, [], [1, 2, 3], [1])
    # 1 comes back after an unclean shutdown (its unflushed tail may be gone): out of the ELR, not leader
    back = partition_change(waiting, [1, 2, 3], {1}, ELR, target_isr=[], unclean_shutdown=frozenset({1}))
    assert (back.leader, back.isr, back.elr) == (-1, [], [2, 3])
    # 3 comes back (its process was only paused or cut off): it leads from the ELR, with its whole log
    led = partition_change(back, [1, 2, 3], {1, 3}, ELR)
    assert (led.leader, led.isr, led.elr, led.last_known_elr) == (3, [3], [2], [])
    # without ELR the unclean flag is ignored and the old ISR member leads when it returns
    assert after_loss(st(-1, 5, [1]), {1}) == (1, 6, [1])


def test_elr_with_isr_and_elr_empty_the_last_known_leader_leads_once_live_as_an_unclean_election():
    lost_all = st(-1, 5, [], elr=[], last_known=[3])
    assert partition_change(lost_all, [1, 2, 3], {1, 2}, ELR) is None
    new = partition_change(lost_all, [1, 2, 3], {1, 2, 3}, ELR)
    assert (new.leader, new.leader_epoch, new.isr, new.elr, new.last_known_elr) == (3, 6, [3], [], [])


def test_elr_unclean_election_where_allowed_comes_after_the_eligible_replicas_and_clears_them():
    rules = ElectionRules(unclean_allowed=True, elr_enabled=True, min_isr=2)
    # an eligible replica is alive: it leads, not the first live replica
    new = partition_change(st(1, 4, [1], elr=[3]), [1, 2, 3], {2, 3}, rules)
    assert (new.leader, new.isr) == (3, [3])
    # no eligible replica alive and no last known leader: any live replica, the ELR cleared
    new = partition_change(st(1, 4, [1], elr=[3]), [1, 2, 3], {2}, rules)
    assert (new.leader, new.isr, new.elr, new.last_known_elr) == (2, [2], [], [])


def topic(name="t", partitions=3, rf=0, **configs):
    return broker_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, configs=configs)


@pytest.mark.parametrize("t,existing,live,error", [
    (topic(name="a/b"), set(), [1, 2, 3], E.INVALID_TOPIC_EXCEPTION),
    (topic(name="t"), {"t"}, [1, 2, 3], E.TOPIC_ALREADY_EXISTS),
    (topic(partitions=0), set(), [1, 2, 3], E.INVALID_PARTITIONS),
    (topic(partitions=10001), set(), [1, 2, 3], E.INVALID_PARTITIONS),
    (topic(rf=4), set(), [1, 2, 3], E.INVALID_REPLICATION_FACTOR),
    (topic(rf=1), set(), [], E.INVALID_REPLICATION_FACTOR),
    (topic(**{"min.insync.replicas": "many"}), set(), [1, 2, 3], E.INVALID_CONFIG),
])
def test_a_bad_topic_is_refused_with_kafkas_error(t, existing, live, error):
    got = check_new_topic(t, existing, live, default_rf=3)
    assert isinstance(got, TopicRefused) and got.error == error and got.message


def test_a_good_topic_gets_the_requested_or_the_default_replication_factor_capped_by_the_live_brokers():
    assert check_new_topic(topic(rf=2), set(), [1, 2, 3], default_rf=3) == 2
    assert check_new_topic(topic(), set(), [1, 2], default_rf=3) == 2
    assert check_new_topic(topic(), set(), [1, 2, 3], default_rf=3) == 3


def manual(*lists, partitions=None):
    t = broker_pb2.CreatableTopic(name="m")
    for p, reps in zip(partitions or range(len(lists)), lists):
        t.assignments.add(partition=p, broker_ids=list(reps))
    return t


@pytest.mark.parametrize("t,why", [
    (manual([1, 1]), "Duplicate"),
    (manual([1, 2], [3]), "same number of replicas"),
    (manual([1], [2], partitions=[0, 2]), "consecutive"),
    (manual([1], [2], partitions=[1, 1]), "consecutive"),
    (manual([]), "empty"),
    (manual([1, 9]), "broker 9"),
])
def test_a_bad_manual_assignment_is_refused_with_invalid_replica_assignment(t, why):
    got = check_new_topic(t, set(), [1, 2, 3], default_rf=3)
    assert isinstance(got, TopicRefused) and got.error == E.INVALID_REPLICA_ASSIGNMENT and why in got.message


def test_a_manual_assignment_sets_the_replication_factor_whatever_the_default():
    assert check_new_topic(manual([3, 1], [1, 2]), set(), [1, 2, 3], default_rf=3) == 2
    assert manual_assignment(manual([3, 1], [1, 2]), [1, 2, 3]) == {0: [3, 1], 1: [1, 2]}
    assert manual_assignment(topic(), [1, 2, 3]) is None
