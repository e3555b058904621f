"""KAFKA-15449 (Kafka 3.7): a TxnOffsetCommit is verified with the transaction coordinator, so a late commit of
a finished transaction cannot move a group's offset back; before 3.7 it can.

One broker in process: a real ReplicaManager leading __consumer_offsets-0 and the GroupCoordinator; the
transaction coordinator's verify-only AddPartitionsToTxn is a fake that answers as the coordinator would
(NONE while the offsets partition is in the producer's ongoing transaction, INVALID_TXN_STATE once it
completed). Markers go through the replica manager's WriteTxnMarkers path, as the coordinator's do.
"""
import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.group_coordinator import GroupCoordinator
from tests.helpers import offsets_leader

pytestmark = pytest.mark.fast
OFFSETS = "__consumer_offsets"
PID, EPOCH = 7, 0


class Coordinator:
    """The transaction coordinator's answer to a verification: is the offsets partition in the open txn?"""

    def __init__(self):
        self.in_txn = False
        self.calls = 0
        self.adds: list[bool] = []     # per call: was the partition to be added (KIP-890 part 2)?
        self.during = None      # called inside the verification (a marker racing with it)

    def verify(self, tid, pid, epoch, topic, partition, add=False):
        self.calls += 1
        self.adds.append(add)
        if add:
            self.in_txn = True
        if self.during is not None:
            self.during()
        return E.NONE if self.in_txn else E.INVALID_TXN_STATE


@pytest.fixture
def broker(tmp_path):
    md, rm = offsets_leader(tmp_path)
    coordinator = Coordinator()
    rm.get_partition(OFFSETS, 0).verify_txn = coordinator.verify
    yield rm, md, coordinator
    rm.shutdown()


def group_coordinator(rm, md, verification: bool) -> GroupCoordinator:
    return GroupCoordinator(rm, md, txn_offset_commit_member_check=False, time=MockTime(),
                            txn_offset_commit_verification=verification)


def commit_offset(gc, offset: int) -> int:
    return gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=PID, producer_epoch=EPOCH, generation_id=-1,
        partitions=[broker_pb2.OffsetCommitPartition(topic="in", partition=0, offset=offset)])).error


def marker(rm, committed=True) -> None:
    r = rm.write_txn_markers(broker_pb2.WriteTxnMarkersRequest(markers=[broker_pb2.WritableTxnMarker(
        producer_id=PID, producer_epoch=EPOCH, committed=committed, coordinator_epoch=0,
        partitions=[common_pb2.TopicPartition(topic=OFFSETS, partition=0)])]))
    assert r.markers[0].partitions[0].error == E.NONE


def committed_offset(gc) -> int:
    r = gc.offset_fetch(broker_pb2.OffsetFetchRequest(group_id="g", require_stable=True, partitions=[
        common_pb2.TopicPartition(topic="in", partition=0)]))
    return r.partitions[0].error, r.partitions[0].offset


def transaction_commits_10(rm, gc, coordinator) -> None:
    coordinator.in_txn = True                      # AddOffsetsToTxn put the offsets partition in the txn
    assert commit_offset(gc, 10) == E.NONE
    assert commit_offset(gc, 10) == E.NONE         # the open transaction on the partition: no new check
    assert coordinator.calls == 1
    marker(rm)
    coordinator.in_txn = False                     # CompleteCommit
    assert committed_offset(gc) == (E.NONE, 10)


def test_a_late_txn_offset_commit_is_refused_and_the_offset_stays(broker):
    rm, md, coordinator = broker
    gc = group_coordinator(rm, md, verification=True)
    transaction_commits_10(rm, gc, coordinator)
    assert commit_offset(gc, 3) == E.INVALID_TXN_STATE          # late: its transaction has completed
    assert committed_offset(gc) == (E.NONE, 10)                  # no pending commit: require_stable answers
    coordinator.in_txn = True                                    # the producer's next transaction
    marker(rm)
    assert committed_offset(gc) == (E.NONE, 10)                  # never back to 3


def test_before_3_7_the_late_commit_moves_the_offset_back(broker):
    rm, md, coordinator = broker
    gc = group_coordinator(rm, md, verification=False)
    coordinator.in_txn = True
    assert commit_offset(gc, 10) == E.NONE
    marker(rm)
    assert commit_offset(gc, 3) == E.NONE                        # accepted although its transaction is over
    assert committed_offset(gc)[0] == E.UNSTABLE_OFFSET_COMMIT
    marker(rm)                                                    # the next transaction's commit
    assert committed_offset(gc) == (E.NONE, 3)
    assert coordinator.calls == 0


def test_a_marker_between_verification_and_append_voids_the_commit(broker):
    rm, md, coordinator = broker
    gc = group_coordinator(rm, md, verification=True)
    coordinator.in_txn = True
    assert commit_offset(gc, 5) == E.NONE
    marker(rm, committed=False)                                   # that transaction aborted
    coordinator.during = lambda: marker(rm, committed=False)      # an abort lands while the next one verifies
    assert commit_offset(gc, 6) == E.INVALID_TXN_STATE
    assert committed_offset(gc) == (E.NONE, -1)


def test_a_coordinator_that_cannot_answer_is_retriable_for_the_client(broker):
    rm, md, _ = broker
    gc = group_coordinator(rm, md, verification=True)
    rm.get_partition(OFFSETS, 0).verify_txn = lambda *a, **kw: E.NOT_ENOUGH_REPLICAS
    assert commit_offset(gc, 5) == E.COORDINATOR_NOT_AVAILABLE   # maybeConvertOffsetCommitError


def test_transaction_version_2_adds_the_partition_even_with_verification_off(broker):
    """Kafka's ReplicaManager skips the coordinator only when neither verification is on nor the request
    is transaction.version 2 (TxnOffsetCommit v5, Produce v12): those ask it to add the partition."""
    from eoslab.common import record_batch as rb
    rm, md, coordinator = broker
    gc = group_coordinator(rm, md, verification=False)
    assert commit_offset(gc, 3) == E.NONE and coordinator.adds == []      # TV1 before 3.7: not asked
    r = gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=PID + 1, producer_epoch=EPOCH, generation_id=-1,
        add_partition_to_txn=True, partitions=[broker_pb2.OffsetCommitPartition(topic="in", partition=0, offset=4)]))
    assert r.error == E.NONE and coordinator.adds == [True]
    p = rm.get_partition(OFFSETS, 0)
    batch = rb.build_batch([(b"k", b"v", 1)], producer_id=PID + 2, producer_epoch=EPOCH, base_sequence=0,
                           transactional=True)
    assert p.append_records_to_leader(batch, transactional_id="tx2", add_to_txn=True).error == E.NONE
    assert coordinator.adds == [True, True]
    again = rb.build_batch([(b"k", b"v", 1)], producer_id=PID + 2, producer_epoch=EPOCH, base_sequence=1,
                           transactional=True)
    assert p.append_records_to_leader(again, transactional_id="tx2", add_to_txn=True).error == E.NONE
    assert coordinator.adds == [True, True]          # its transaction is open there: not asked again
