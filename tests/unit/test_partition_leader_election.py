"""The controller's choice of leader and ISR after broker loss, and its checks of a new topic."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.controller.context import LeaderIsr
from services.controller.partition_leader_election import elect_after_broker_loss
from services.controller.topic_creation import TopicRefused, check_new_topic

pytestmark = pytest.mark.fast


def st(leader, epoch, isr):
    return LeaderIsr(leader, epoch, list(isr), 1)


def test_a_live_leader_keeps_leading_and_its_epoch_when_only_its_isr_shrinks():
    assert elect_after_broker_loss(st(1, 4, [1, 2, 3]), [1, 2, 3], {1, 2}, False) == (1, 4, [1, 2])
    assert elect_after_broker_loss(st(1, 4, [1, 2]), [1, 2, 3], {1, 2}, False) is None


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_a_new_epoch():
    assert elect_after_broker_loss(st(1, 4, [1, 3, 2]), [1, 2, 3], {2, 3}, False) == (3, 5, [3, 2])


def test_with_no_live_isr_member_the_partition_waits_unless_unclean_election_is_allowed():
    # clean: no leader, the last ISR kept for a clean election when 1 returns
    assert elect_after_broker_loss(st(1, 4, [1]), [1, 2, 3], {2, 3}, False) == (-1, 5, [1])
    assert elect_after_broker_loss(st(-1, 5, [1]), [1, 2, 3], {2, 3}, False) is None
    # unclean: an out-of-sync replica leads, alone in the ISR
    assert elect_after_broker_loss(st(1, 4, [1]), [1, 2, 3], {2, 3}, True) == (2, 5, [2])


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
