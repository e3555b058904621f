"""Cluster membership: internal RPCs from a process without the cluster's secret are refused (UNAUTHENTICATED)
and change nothing; client APIs stay open; the cluster keeps working."""
import time

import grpc
import pytest

from eoslab.v1 import (broker_pb2, broker_pb2_grpc, common_pb2, controller_pb2, controller_pb2_grpc, faults_pb2,
                       faults_pb2_grpc, txn_pb2, txn_pb2_grpc)
from eoslab.common import rpc
from tests import helpers as h

pytestmark = pytest.mark.integration
INT32_MAX = 2 ** 31 - 1


def _outsider(address: str) -> grpc.Channel:
    """A channel that carries no secret (this test process is a member of the cluster it started)."""
    return grpc.insecure_channel(address)


def _refused(call) -> None:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value


def _controller(rt):
    for n in rt.info().by_role("controller"):
        with rpc.channel(n.address) as ch:
            r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                         timeout=5)
        if r.error == 0:
            return n.address, r.controller_epoch
    raise AssertionError("no active controller")


def test_outsiders_cannot_speak_internal_rpcs(make_cluster):
    rt = make_cluster(brokers=3, controllers=2, txn_coordinators=1)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "m1", partitions=1)
    leader = h.leader_address(md, "m1")
    pid, epoch = h.init_pid(leader)
    assert h.produce_raw(leader, "m1", h.batch(pid, epoch, 0, 5)).error == 0
    ctrl, epoch_before = _controller(rt)
    brokers = [n.address for n in rt.info().by_role("broker")]
    tp = common_pb2.TopicPartition(topic="m1", partition=0)

    for addr in brokers:
        b = broker_pb2_grpc.BrokerStub(_outsider(addr))
        _refused(lambda: b.UpdateMetadata(broker_pb2.UpdateMetadataRequest(controller_epoch=INT32_MAX), timeout=5))
        _refused(lambda: b.LeaderAndIsr(broker_pb2.LeaderAndIsrRequest(controller_epoch=INT32_MAX), timeout=5))
        _refused(lambda: b.WriteTxnMarkers(broker_pb2.WriteTxnMarkersRequest(markers=[
            broker_pb2.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, committed=True, partitions=[tp])]),
            timeout=5))
        _refused(lambda: b.Fetch(broker_pb2.FetchRequest(replica_id=2, max_wait_ms=0, partitions=[
            broker_pb2.FetchPartition(topic="m1", partition=0, fetch_offset=10 ** 12)]), timeout=5))
        _refused(lambda: b.OffsetsForLeaderEpoch(broker_pb2.OffsetsForLeaderEpochRequest(replica_id=2), timeout=5))
        # a follower's fetch session is broker to broker only, whatever the request says
        _refused(lambda: list(b.ReplicaFetch(iter([broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[
            broker_pb2.FetchPartition(topic="m1", partition=0, fetch_offset=0)])]), timeout=5)))
        internal = broker_pb2.ProduceRequest(acks=1, partitions=[broker_pb2.PartitionProduceData(
            topic="__transaction_state", partition=0, batch=h.batch(pid, epoch, 0, 1))])
        _refused(lambda: b.Produce(internal, timeout=5))
        _refused(lambda: list(b.ProduceStream(iter([internal]), timeout=5)))
        _refused(lambda: faults_pb2_grpc.FaultInjectorStub(_outsider(addr)).ClearFaults(
            faults_pb2.ClearFaultsRequest(), timeout=5))
        # client APIs stay open
        assert b.Metadata(broker_pb2.MetadataRequest(), timeout=5).brokers
        r = b.Fetch(broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[
            broker_pb2.FetchPartition(topic="m1", partition=0, fetch_offset=0)]), timeout=5)
        assert r.partitions[0].error in (0, common_pb2.NOT_LEADER_OR_FOLLOWER)

    c = controller_pb2_grpc.ControllerStub(_outsider(ctrl))
    _refused(lambda: c.AllocateProducerIds(controller_pb2.AllocateProducerIdsRequest(broker_id=1), timeout=5))
    _refused(lambda: c.AlterPartition(controller_pb2.AlterPartitionRequest(
        broker_id=1, topic="m1", partition=0, new_isr=[1, 1, 1]), timeout=5))
    assert c.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=5).error == 0

    tc = rt.info().by_role("txn-coordinator")[0].address
    t = txn_pb2_grpc.TransactionCoordinatorStub(_outsider(tc))
    _refused(lambda: t.AddPartitionsToTxn(txn_pb2.AddPartitionsToTxnRequest(
        transactional_id="x", producer_id=pid, producer_epoch=epoch, verify_only=True, partitions=[tp]), timeout=5))

    # nothing changed: same controller epoch a while later, a new topic takes writes, old records are there
    time.sleep(2)
    assert _controller(rt) == (ctrl, epoch_before)
    md2 = h.new_topic(boot, "m2", partitions=1)
    l2 = h.leader_address(md2, "m2")
    assert h.produce_raw(l2, "m2", h.batch(pid, epoch, 0, 3)).error == 0
    assert [r.value for r in h.read_partition(boot, "m1")] == [f"v{i}".encode() for i in range(5)]


def test_outsiders_cannot_change_zookeeper(make_cluster):
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    from services.common import zk_paths
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    ctrl, epoch = _controller(rt)
    zk = KazooClient(hosts=rt.info().zookeeper)
    zk.start()
    try:
        assert zk.get(zk_paths.CONTROLLER)[0]                      # anyone may read
        for change in (lambda: zk.set(zk_paths.CONTROLLER_EPOCH, b"2147483647"),
                       lambda: zk.delete(zk_paths.CONTROLLER),
                       lambda: zk.create(zk_paths.broker_path(7), b"{}", ephemeral=True),
                       lambda: zk.create("/fake", b""),
                       lambda: zk.set(zk_paths.CONTROLLER, b"{}")):
            with pytest.raises(NoAuthError):
                change()
    finally:
        zk.stop()
        zk.close()
    assert _controller(rt) == (ctrl, epoch)


def test_kafka_clients_cannot_append_to_internal_topics(make_cluster):
    ck = pytest.importorskip("confluent_kafka")
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=1)
    info = rt.info()
    p = ck.Producer({"bootstrap.servers": info.kafka_bootstrap, "acks": "1", "retries": 0,
                     "message.timeout.ms": 20000})
    results = []
    p.produce("__transaction_state", b"garbage", partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(30)
    assert len(results) == 1 and results[0] is not None
    assert results[0].code() == ck.KafkaError.TOPIC_EXCEPTION, results[0]
