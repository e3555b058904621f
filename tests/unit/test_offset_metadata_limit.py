"""offset.metadata.max.bytes on the group coordinator: a partition whose commit metadata is longer than
the limit (Java's String.length, UTF-16 units) gets OFFSET_METADATA_TOO_LARGE and is not written, the
commit's other partitions are, in OffsetCommit and TxnOffsetCommit (Kafka's GroupMetadataManager.
validateOffsetMetadataLength / OffsetMetadataManager.isMetadataInvalid).

One broker in process: a real ReplicaManager leading __consumer_offsets-0 and the GroupCoordinator."""
import pytest

from eoslab.common.errors import E
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2
from services.broker.group_coordinator import OFFSET_METADATA_MAX_BYTES, GroupCoordinator
from tests.helpers import offsets_leader

pytestmark = pytest.mark.fast
OFFSETS = "__consumer_offsets"


@pytest.fixture
def gc(tmp_path):
    md, rm = offsets_leader(tmp_path)
    gc = GroupCoordinator(rm, md, txn_offset_commit_member_check=False, time=MockTime())
    yield gc
    gc.shutdown()
    rm.shutdown()


def _parts(*metadata):
    return [broker_pb2.OffsetCommitPartition(topic="in", partition=i, offset=10 + i, metadata=m)
            for i, m in enumerate(metadata)]


def _committed(gc, group):
    r = gc.offset_fetch(broker_pb2.OffsetFetchRequest(group_id=group))
    return {p.partition: (p.offset, p.metadata) for p in r.partitions}


def test_a_commit_with_too_much_metadata_on_one_partition_commits_the_others(gc):
    ok, long_ = "x" * OFFSET_METADATA_MAX_BYTES, "x" * (OFFSET_METADATA_MAX_BYTES + 1)
    r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id="g", generation_id=-1,
                                                        partitions=_parts(ok, long_, "")))
    assert r.error == E.NONE
    assert [p.error for p in r.partitions] == [E.NONE, E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert _committed(gc, "g") == {0: (10, ok), 2: (12, "")}


def test_the_limit_counts_utf16_units_as_java_s_string_length(gc):
    emoji = "\U0001F600"           # one code point, two UTF-16 units
    fits, over = emoji * (OFFSET_METADATA_MAX_BYTES // 2), emoji * (OFFSET_METADATA_MAX_BYTES // 2) + "x"
    r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id="g", generation_id=-1,
                                                        partitions=_parts(fits, over)))
    assert [p.error for p in r.partitions] == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]


def test_a_commit_whose_every_partition_is_too_large_writes_nothing(gc):
    end = gc.rm.partitions[(OFFSETS, 0)].log.log_end_offset
    long_ = "y" * (OFFSET_METADATA_MAX_BYTES + 1)
    r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id="g", generation_id=-1,
                                                        partitions=_parts(long_, long_)))
    assert [p.error for p in r.partitions] == [E.OFFSET_METADATA_TOO_LARGE] * 2
    assert _committed(gc, "g") == {}
    assert gc.rm.partitions[(OFFSETS, 0)].log.log_end_offset == end      # no record appended


def test_a_group_error_is_answered_on_every_partition_not_the_metadata_error(gc):
    r = gc.offset_commit(broker_pb2.OffsetCommitRequest(group_id="g", generation_id=3, member_id="nobody",
                                                        partitions=_parts("z" * (OFFSET_METADATA_MAX_BYTES + 1))))
    assert r.error != E.NONE
    assert [p.error for p in r.partitions] == [r.error]


def test_a_transactional_commit_keeps_the_same_limit(gc):
    long_ = "t" * (OFFSET_METADATA_MAX_BYTES + 1)
    r = gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0, generation_id=-1,
        partitions=_parts("fine", long_)))
    assert r.error == E.NONE
    assert [p.error for p in r.partitions] == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]
