"""transaction.version 2 (KIP-890 part 2) on a `--kafka-version 4.0` cluster, spoken as Kafka 4.0's Java
producer speaks it (no PyPI client does yet), every request over the Kafka listeners:

ApiVersions finalizes transaction.version 2; a Produce v12 starts the transaction on its partition with
no AddPartitionsToTxn (the leader has the coordinator add it) and a TxnOffsetCommit v5 with no
AddOffsetsToTxn; EndTxn v5 bumps the epoch and returns it, so a late write of the finished transaction
is refused instead of opening a hanging transaction (what the same late write does on 3.0 is
test_hanging_toolkit's); a retried EndTxn gets the same answer; EndTxn below v5 still never bumps.
"""
import time
import uuid

import pytest

from eoslab.common import kafka_records as kr
from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from tests import helpers as h
from tests.kafka_protocol.test_hanging_toolkit import initialized, offsets, send

pytestmark = pytest.mark.integration


def produce(address, topic, tid, pid, epoch, seq, value: bytes, version=12) -> tuple[int, int]:
    """(error code, base offset) of one transactional batch to partition 0."""
    batch = rb.build_batch([(None, value, int(time.time() * 1000))], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=True)
    r = send(address, 0, version, transactional_id=tid, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": kr.to_kafka(batch)}]}])
    part = r.responses[0].partition_responses[0]
    return part.error_code.value, part.base_offset


def produce_retrying(*args, **kw) -> tuple[int, int]:
    """As a producer does: a retriable answer (the coordinator still completing the last transaction:
    NOT_ENOUGH_REPLICAS from the leader, nothing appended) is sent again."""
    def attempt():
        r = produce(*args, **kw)
        return None if r[0] == E.NOT_ENOUGH_REPLICAS else r
    return h.wait_for(attempt, timeout=30, what="a produce past NOT_ENOUGH_REPLICAS")


def test_a_transaction_version_2_producer_on_4_0_needs_no_add_calls_and_is_fenced_by_each_end(make_cluster):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    rt = make_cluster()                                   # the default release: 4.0
    info = rt.info()
    boot = info.kafka_bootstrap
    topic, other = f"tv2-{uuid.uuid4().hex[:6]}", f"tv1-{uuid.uuid4().hex[:6]}"
    tid, group = f"tv2-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=boot.split(","))
    admin.create_topics([NewTopic(topic, 1, 3), NewTopic(other, 1, 3)])
    leaders = {}

    def led(t):
        [d] = admin.describe_topics([t])
        p = d["partitions"][0]
        leaders[t] = p["leader_id"]
        return p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3
    for t in (topic, other):
        h.wait_for(lambda: led(t), timeout=30, what=f"a leader of {t} with a full ISR")
    brokers = {n.node_id: n for n in info.by_role("broker")}
    leader = f"{brokers[leaders[topic]].host}:19192"
    other_leader = f"{brokers[leaders[other]].host}:19192"

    versions = send(leader, 18, 4, client_software_name="t", client_software_version="1")
    assert {f.name: f.max_version_level for f in versions.finalized_features}["transaction.version"] == 2
    served = {k.api_key: k.max_version for k in versions.api_keys}
    assert (served[0], served[28]) == (12, 5)

    coordinator, pid, epoch = h.wait_for(lambda: initialized(leader, tid, version=5), timeout=60,
                                         what="InitProducerId")
    coordinator_versions = {k.api_key: k.max_version for k in send(
        coordinator, 18, 4, client_software_name="t", client_software_version="1").api_keys}
    assert coordinator_versions[26] == 5

    # Produce v12: no AddPartitionsToTxn, the leader adds the partition; v11 (a TV1 producer's) does not
    assert produce_retrying(leader, topic, tid, pid, epoch, 0, b"one") == (E.NONE, 0)
    assert produce_retrying(other_leader, other, tid, pid, epoch, 0, b"tv1", version=11)[0] == E.INVALID_TXN_STATE
    def group_coordinator_found():
        c = send(leader, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]
        return c if c.error_code.value == 0 else None
    fc = h.wait_for(group_coordinator_found, timeout=60, what="the group coordinator")
    group_coordinator = f"{fc.host}:{fc.port}"
    commit = send(group_coordinator, 28, 5, transactional_id=tid, group_id=group, producer_id=pid,
                  producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
                  topics=[{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": ""}]}])
    assert commit.topics[0].partitions[0].error_code.value == E.NONE     # no AddOffsetsToTxn either

    done = send(coordinator, 26, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True)
    assert (done.error_code.value, done.producer_id, done.producer_epoch) == (E.NONE, pid, epoch + 1)
    h.wait_for(lambda: offsets(leader, topic) == (2, 2), timeout=30, what="the COMMIT marker")
    again = send(coordinator, 26, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True)
    assert (again.error_code.value, again.producer_epoch) == (E.NONE, epoch + 1)      # a retry: the same answer
    fetched = send(group_coordinator, 9, 7, group_id=group, require_stable=True,
                   topics=[{"name": topic, "partition_indexes": [0]}])
    assert fetched.topics[0].partitions[0].committed_offset == 1

    # the late write of the finished transaction: refused, and the partition is not left hanging
    assert produce_retrying(leader, topic, tid, pid, epoch, 1, b"late")[0] == E.INVALID_PRODUCER_EPOCH
    assert offsets(leader, topic) == (2, 2)

    # the next transaction goes on at the epoch EndTxn returned; an abort bumps it again
    assert produce_retrying(leader, topic, tid, pid, epoch + 1, 0, b"two") == (E.NONE, 2)
    aborted = send(coordinator, 26, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch + 1,
                   committed=False)
    assert (aborted.error_code.value, aborted.producer_epoch) == (E.NONE, epoch + 2)
    h.wait_for(lambda: offsets(leader, topic) == (4, 4), timeout=30, what="the ABORT marker")

    # EndTxn v4 is a TV1 client's: the epoch stays (it needs an AddPartitionsToTxn of its own, too)
    assert produce_retrying(leader, topic, tid, pid, epoch + 2, 0, b"three") == (E.NONE, 4)
    tv1 = send(coordinator, 26, 4, transactional_id=tid, producer_id=pid, producer_epoch=epoch + 2, committed=True)
    assert tv1.error_code.value == E.NONE
    h.wait_for(lambda: offsets(leader, topic) == (6, 6), timeout=30, what="the COMMIT marker")
    assert produce_retrying(leader, topic, tid, pid, epoch + 2, 1, b"four", version=11) == (E.INVALID_TXN_STATE, -1)
