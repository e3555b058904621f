"""A late TxnOffsetCommit against a real cluster, per release: from Kafka 3.7 (the lab's 4.0) the group
coordinator verifies it with the transaction coordinator and refuses it, so the group's offset stays; on
3.6 it is accepted and the producer's next transaction commits the stale value (KAFKA-15449). Every
request is raw Kafka protocol to the Kafka listeners, as a client whose commit was delayed would send it.
"""
import uuid

import pytest

from eoslab.common.errors import RETRIABLE, name
from tests import helpers as h
from tests.kafka_protocol.test_hanging_toolkit import send

pytestmark = pytest.mark.integration


def commit(group_coordinator, tid, group, pid, epoch, offset) -> int:
    """The commit's final answer: a retriable one (the group coordinator could not reach the transaction
    coordinator to verify, say) is retried, as Kafka's TxnOffsetCommitHandler does."""
    seen = []

    def answered():
        code = commit_once(group_coordinator, tid, group, pid, epoch, offset)
        seen.append(name(code))
        return None if code in RETRIABLE else (code,)
    try:
        return h.wait_for(answered, timeout=30, what="TxnOffsetCommit")[0]
    except AssertionError:
        raise AssertionError(f"TxnOffsetCommit answered only retriable errors: {sorted(set(seen))}") from None


def commit_once(group_coordinator, tid, group, pid, epoch, offset) -> int:
    r = send(group_coordinator, 28, 3, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
             generation_id=-1, member_id="", group_instance_id=None, topics=[
                 {"name": "in", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}])
    return r.topics[0].partitions[0].error_code.value


def fetched(group_coordinator, group) -> tuple[int, int]:
    r = send(group_coordinator, 9, 7, group_id=group, require_stable=True,
             topics=[{"name": "in", "partition_indexes": [0]}])
    p = r.topics[0].partitions[0]
    return p.error_code.value, p.committed_offset


@pytest.mark.parametrize("version,late_error", [("4.0", 48), ("3.6", 0)])   # 48: INVALID_TXN_STATE
def test_a_late_txn_offset_commit_per_release(make_cluster, version, late_error):
    flag = f"--kafka-version={version}"
    rt = make_cluster(controllers=1, broker_args=[flag], txn_coordinator_args=[flag])
    kafka = rt.info().kafka_bootstrap.split(",")[0]
    h.new_topic(rt.info().bootstrap, "in")      # a commit for a topic the broker does not know is refused
    h.wait_for(lambda: send(kafka, 3, 9, topics=[{"name": "in", "topic_id": None}], allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False).topics[0].error_code.value == 0,
               timeout=30, what="the topic in the Kafka listener's metadata")
    tid, group = f"copier-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"

    def coordinator(key_type, key):
        def found():
            c = send(kafka, 10, 4, key_type=key_type, coordinator_keys=[key]).coordinators[0]
            return f"{c.host}:{c.port}" if c.error_code.value == 0 else None
        return h.wait_for(found, timeout=60, what=f"the coordinator of {key}")
    groups = coordinator(0, group)

    errors = []

    def init():
        # As Kafka's TransactionManager: each attempt asks for the coordinator again, since the answer
        # NOT_COORDINATOR means the one found has lost the id's partition (the coordinators were still
        # settling their partitions when the cluster came up).
        at = coordinator(1, tid)
        r = send(at, 22, 4, transactional_id=tid, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
        errors.append(r.error_code.name)
        return (at, r.producer_id, r.producer_epoch) if r.error_code.value == 0 else None
    try:
        txn, pid, epoch = h.wait_for(init, timeout=60, what="InitProducerId")
    except AssertionError:
        raise AssertionError(f"InitProducerId never succeeded: its answers {sorted(set(errors))}") from None

    def transaction(offset) -> None:
        assert send(txn, 25, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                    group_id=group).error_code.value == 0
        assert commit(groups, tid, group, pid, epoch, offset) == 0
        assert send(txn, 26, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                    committed=True).error_code.value == 0
        h.wait_for(lambda: fetched(groups, group) == (0, offset), timeout=30, what=f"offset {offset} committed")

    transaction(10)
    assert commit(groups, tid, group, pid, epoch, 3) == late_error      # delayed: its transaction is over
    if late_error:
        assert fetched(groups, group) == (0, 10)                          # nothing pending: stable at once
        transaction(11)                                                   # the next transaction: 11, never 3
    else:                                                                 # 3.6: the next commit writes 3
        assert send(txn, 25, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                    group_id=group).error_code.value == 0
        assert send(txn, 26, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                    committed=True).error_code.value == 0
        h.wait_for(lambda: fetched(groups, group) == (0, 3), timeout=30, what="the stale offset committed")
