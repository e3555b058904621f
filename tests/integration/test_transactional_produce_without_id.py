"""A Produce of transactional batches that carries no transactional.id: refused whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED from Kafka 2.2 (KafkaApis.handleProduceRequest), appended
before (with no authorizer), where it opens a transaction no coordinator knows and hangs the LSO."""
import time

import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from tests import helpers as h

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("version,error", [("4.0", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ("0.11", E.NONE)])
def test_a_transactional_batch_without_a_transactional_id(make_cluster, version, error):
    flag = f"--kafka-version={version}"
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0, broker_args=[flag])
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "noid")
    md.refresh(["noid"])
    addr = md.leader("noid", 0)[1]
    h.wait_for(lambda: md.stub(addr).ListOffsets(broker_pb2.ListOffsetsRequest(partitions=[
        broker_pb2.ListOffsetsPartition(topic="noid", partition=0, timestamp=-1)]), timeout=5).partitions[0].error
        == E.NONE, what="the leader to act as leader")
    batch = rb.build_batch([(None, b"x", int(time.time() * 1000))], producer_id=4242, producer_epoch=0,
                           base_sequence=0, transactional=True)
    r = md.stub(addr).Produce(broker_pb2.ProduceRequest(acks=-1, timeout_ms=10000, partitions=[
        broker_pb2.PartitionProduceData(topic="noid", partition=0, batch=batch)]), timeout=15)
    assert r.partitions[0].error == error, r
    end = {iso: md.stub(addr).ListOffsets(broker_pb2.ListOffsetsRequest(isolation_level=iso, partitions=[
        broker_pb2.ListOffsetsPartition(topic="noid", partition=0, timestamp=-1)]), timeout=5).partitions[0].offset
        for iso in (broker_pb2.READ_COMMITTED, broker_pb2.READ_UNCOMMITTED)}
    if error == E.NONE:        # appended: an open transaction holds the LSO at 0
        assert end == {broker_pb2.READ_COMMITTED: 0, broker_pb2.READ_UNCOMMITTED: 1}
    else:                      # nothing appended
        assert end == {broker_pb2.READ_COMMITTED: 0, broker_pb2.READ_UNCOMMITTED: 0}
