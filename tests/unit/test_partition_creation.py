"""CreatePartitions' checks and assignment on the controller (Kafka's AdminZkClient.addPartitions),
as a pure function of the request, the topic's assignment and the live brokers."""
from types import SimpleNamespace as NS

import pytest

from eoslab.common.errors import E
from services.controller.partition_creation import new_assignment
from services.controller.topic_creation import TopicRefused

pytestmark = pytest.mark.fast
EXISTING = {0: [2, 3, 1], 1: [3, 1, 2]}
LIVE = [1, 2, 3, 4]


def ask(count, assignments=None, name="t", existing=EXISTING, live=LIVE):
    t = NS(name=name, count=count, has_assignments=assignments is not None,
           assignments=[NS(broker_ids=a) for a in assignments or ()])
    return new_assignment(t, existing, live)


def error(result):
    assert isinstance(result, TopicRefused), result
    return result.error


def test_new_partitions_get_the_topic_s_replication_factor_round_robin_from_partition_0_s_first_replica():
    assert ask(4) == {2: [4, 1, 2], 3: [1, 2, 3]}      # partition p starts at live[(index of 2) + p]
    assert ask(3, [[4, 1, 2]]) == {2: [4, 1, 2]}        # as given


@pytest.mark.parametrize("count,assignments,name,existing,live,code", [
    (3, None, "t", None, LIVE, E.UNKNOWN_TOPIC_OR_PARTITION),
    (1, None, "t", EXISTING, LIVE, E.INVALID_PARTITIONS),            # fewer
    (2, None, "t", EXISTING, LIVE, E.INVALID_PARTITIONS),            # as many
    (4, [[4, 1, 2]], "t", EXISTING, LIVE, E.INVALID_REPLICA_ASSIGNMENT),       # one assignment for two
    (3, [[4, 4, 2]], "t", EXISTING, LIVE, E.INVALID_REPLICA_ASSIGNMENT),       # a broker twice
    (3, [[4, 1]], "t", EXISTING, LIVE, E.INVALID_REPLICA_ASSIGNMENT),          # another replication factor
    (3, [[9, 1, 2]], "t", EXISTING, LIVE, E.INVALID_REPLICA_ASSIGNMENT),       # no broker 9
    (3, None, "t", EXISTING, [1, 2], E.INVALID_REPLICATION_FACTOR),            # 3 replicas, 2 live brokers
    (8, None, "__consumer_offsets", EXISTING, LIVE, E.INVALID_REQUEST),        # the lab's fixed partitioning
])
def test_each_refusal_has_kafka_s_error(count, assignments, name, existing, live, code):
    assert error(ask(count, assignments, name, existing, live)) == code
