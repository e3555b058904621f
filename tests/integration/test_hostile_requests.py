"""Hostile but well-formed requests, sent by a cluster member (so the membership check is not what stops
them): each is refused with Kafka's error and changes nothing; no request wedges a transactional id."""

import pytest

from clients.admin import create_topic
from eoslab.common.errors import E, KafkaError
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2, common_pb2, controller_pb2, controller_pb2_grpc, txn_pb2, txn_pb2_grpc
from eoslab.common import rpc
from tests import helpers as h

pytestmark = pytest.mark.integration
INT32_MAX = 2 ** 31 - 1


def _describe(rt) -> tuple[str, controller_pb2.DescribeClusterResponse]:
    def active():
        for n in rt.info().by_role("controller"):
            with rpc.channel(n.address) as ch:
                r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                             timeout=5)
            if r.error == 0:
                return n.address, r
        return None
    return h.wait_for(active, what="an active controller")


def _high_watermark(address: str, topic: str) -> int:
    r = h.broker_stub(address).ListOffsets(broker_pb2.ListOffsetsRequest(partitions=[
        broker_pb2.ListOffsetsPartition(topic=topic, partition=0, timestamp=-1)]), timeout=5)
    assert r.partitions[0].error == 0
    return r.partitions[0].offset


def test_isr_with_a_repeated_broker_is_refused(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()
    md = ClusterMetadata(boot)
    create_topic(md, "isr1", 1, replication_factor=1, configs={"min.insync.replicas": "3"})
    leader = h.leader_address(md, "isr1")
    ctrl, d = _describe(rt)
    st = next(s for s in d.partition_states if s.topic == "isr1")
    stub = controller_pb2_grpc.ControllerStub(rpc.channel(ctrl))
    repeated = controller_pb2.AlterPartitionRequest(
        broker_id=st.leader, broker_epoch=h.broker_epoch(rt, st.leader), topic="isr1", partition=0,
        leader_epoch=st.leader_epoch, new_isr=[st.leader] * 3, partition_epoch=st.zk_version)
    assert stub.AlterPartition(repeated, timeout=5).error == E.INVALID_REQUEST
    repeated.broker_epoch = -1            # and from a process of that broker that has not registered
    assert stub.AlterPartition(repeated, timeout=5).error == E.STALE_BROKER_EPOCH
    _, d = _describe(rt)
    assert list(next(s for s in d.partition_states if s.topic == "isr1").isr) == [st.leader]
    pid, epoch = h.init_pid(leader)
    assert h.produce_raw(leader, "isr1", h.batch(pid, epoch, 0, 3)).error == E.NOT_ENOUGH_REPLICAS


def test_follower_fetch_beyond_the_log_end_does_not_move_the_high_watermark(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0,
                      broker_args=["--replica-lag-time-max-ms=20000"])
    boot = rt.bootstrap_all()
    md = ClusterMetadata(boot)
    create_topic(md, "hw1", 1, replication_factor=3)
    leader = h.leader_address(md, "hw1")
    _, d = _describe(rt)
    st = next(s for s in d.partition_states if s.topic == "hw1")
    followers = [b for b in st.replicas if b != st.leader]
    pid, epoch = h.init_pid(leader)
    for b in followers:
        rt.pause(f"broker-{b}")
    try:
        assert h.produce_raw(leader, "hw1", h.batch(pid, epoch, 0, 5), acks=1).error == 0
        assert _high_watermark(leader, "hw1") == 0
        for b in followers:
            r = h.broker_stub(leader).Fetch(broker_pb2.FetchRequest(replica_id=b, max_wait_ms=0, partitions=[
                broker_pb2.FetchPartition(topic="hw1", partition=0, fetch_offset=10 ** 12,
                                          current_leader_epoch=-1)]), timeout=5)
            assert r.partitions[0].error == E.OFFSET_OUT_OF_RANGE
        r = h.broker_stub(leader).Fetch(broker_pb2.FetchRequest(replica_id=99, max_wait_ms=0, partitions=[
            broker_pb2.FetchPartition(topic="hw1", partition=0, fetch_offset=5, current_leader_epoch=-1)]),
            timeout=5)
        assert r.partitions[0].error == E.NOT_LEADER_OR_FOLLOWER     # broker 99 is no replica
        assert _high_watermark(leader, "hw1") == 0                   # nothing is visible that only the leader has
    finally:
        for b in followers:
            rt.resume(f"broker-{b}")
    h.wait_for(lambda: _high_watermark(leader, "hw1") == 5, what="the followers to catch up")


def _coordinator(boot: str, tid: str) -> txn_pb2_grpc.TransactionCoordinatorStub:
    def find():
        r = h.broker_stub(boot.split(",")[0]).FindCoordinator(broker_pb2.FindCoordinatorRequest(
            key_type=broker_pb2.TRANSACTION, key=tid), timeout=5)
        return r if r.error == 0 else None
    r = h.wait_for(find, what="a transaction coordinator")
    return txn_pb2_grpc.TransactionCoordinatorStub(rpc.channel(f"{r.host}:{r.port}"))


def _init(tc, tid):
    def once():
        r = tc.InitProducerId(broker_pb2.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10000,
                                                               producer_id=-1, producer_epoch=-1), timeout=10)
        return r if r.error == 0 else None
    return h.wait_for(once, timeout=20, what=f"InitProducerId({tid}) to succeed")


def test_unknown_partition_in_a_transaction_is_refused_and_nothing_wedges(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=1)
    boot = rt.bootstrap_all()
    h.new_topic(boot, "real", partitions=1)
    tid = "hostile-1"
    tc = _coordinator(boot, tid)
    r = _init(tc, tid)
    pid, epoch = r.producer_id, r.producer_epoch

    def add(*tps):
        return tc.AddPartitionsToTxn(txn_pb2.AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps]), timeout=10)
    for tps in ([("nosuch", 0)], [("real", 99)], [("real", -1)], [("real", 0), ("nosuch", 0)]):
        a = add(*tps)
        assert a.error == E.UNKNOWN_TOPIC_OR_PARTITION, tps
        assert all(p.error == E.UNKNOWN_TOPIC_OR_PARTITION for p in a.partitions)
    assert add(("real", 0)).error == E.NONE
    e = tc.EndTxn(txn_pb2.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                        committed=True), timeout=10)
    assert e.error == E.NONE
    _init(tc, tid)                          # usable again (not CONCURRENT_TRANSACTIONS for good)
    # out-of-range producer ids and epochs are malformed requests
    for bad_pid, bad_epoch in ((pid, -1), (pid, 32768), (pid, INT32_MAX), (-5, 0)):
        r = tc.EndTxn(txn_pb2.EndTxnRequest(transactional_id=tid, producer_id=bad_pid, producer_epoch=bad_epoch,
                                            committed=True), timeout=10)
        assert r.error == E.INVALID_REQUEST
        r = tc.InitProducerId(broker_pb2.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=1000,
                                                               producer_id=bad_pid, producer_epoch=bad_epoch),
                              timeout=10)
        assert r.error == E.INVALID_REQUEST


def test_markers_and_topic_configs_out_of_range_are_refused(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "mk1")
    leader = h.leader_address(md, "mk1")
    pid, epoch = h.init_pid(leader)
    for p_id, p_epoch, c_epoch in ((pid, -1, 0), (pid, INT32_MAX, 0), (pid, 32768, 0), (-1, 0, 0), (pid, 0, -1)):
        r = h.broker_stub(leader).WriteTxnMarkers(broker_pb2.WriteTxnMarkersRequest(markers=[
            broker_pb2.WritableTxnMarker(producer_id=p_id, producer_epoch=p_epoch, coordinator_epoch=c_epoch,
                                         committed=True,
                                         partitions=[common_pb2.TopicPartition(topic="mk1", partition=0)])]),
            timeout=10)
        assert r.markers[0].partitions[0].error == E.INVALID_REQUEST, (p_id, p_epoch, c_epoch)
    assert _high_watermark(leader, "mk1") == 0                       # no marker was written
    for k, v in (("max.message.bytes", "1" + "0" * 40), ("segment.bytes", "13"), ("min.insync.replicas", "0")):
        with pytest.raises(KafkaError) as e:
            create_topic(md, f"cfg-{k.replace('.', '-')}", 1, configs={k: v})
        assert e.value.code == E.INVALID_CONFIG, (k, v)
