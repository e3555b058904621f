"""No starvation: a broker keeps answering Metadata within its deadline while 500 long polls are open against
it, and it still serves long polls as long polls."""
import time

import grpc
import pytest

from eoslab.v1 import broker_pb2, broker_pb2_grpc
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_metadata_is_answered_while_500_long_polls_are_open(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "lp1")
    leader = h.leader_address(md, "lp1")
    channels = [grpc.insecure_channel(leader) for _ in range(10)]     # ten clients, fifty polls each
    poll = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=30000, partitions=[
        broker_pb2.FetchPartition(topic="lp1", partition=0, fetch_offset=0, current_leader_epoch=-1)])
    try:
        polls = [broker_pb2_grpc.BrokerStub(channels[i % 10]).Fetch.future(poll, timeout=60) for i in range(500)]
        time.sleep(0.5)
        stub = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(leader))
        worst = 0.0
        for _ in range(20):
            t0 = time.monotonic()
            r = stub.Metadata(broker_pb2.MetadataRequest(), timeout=5)     # DEADLINE_EXCEEDED would raise
            worst = max(worst, time.monotonic() - t0)
            assert r.brokers
            time.sleep(0.1)
        open_polls = sum(1 for f in polls if not f.done())
        assert open_polls >= 8, "long polls should still wait for data"
        assert worst < 5.0
        for f in polls:
            f.cancel()
        # a cancelled poll frees its thread: a new long poll waits for data again and gets it when it comes
        waiting = broker_pb2_grpc.BrokerStub(channels[0]).Fetch.future(poll, timeout=60)
        time.sleep(0.5)
        assert not waiting.done()
        pid, epoch = h.init_pid(leader)
        assert h.produce_raw(leader, "lp1", h.batch(pid, epoch, 0, 2)).error == 0
        assert len(waiting.result(timeout=10).partitions[0].batches) == 1
    finally:
        for ch in channels:
            ch.close()


def test_idle_producer_connections_cannot_take_every_thread(make_cluster):
    import threading
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    leader = rt.bootstrap_all().split(",")[0]
    stop = threading.Event()

    def idle():                       # a producer connection that never sends a request
        stop.wait(60)
        return
        yield
    channels = [grpc.insecure_channel(leader) for _ in range(10)]
    try:
        calls = [broker_pb2_grpc.BrokerStub(channels[i % 10]).ProduceStream(idle(), timeout=60) for i in range(150)]
        time.sleep(2)
        stub = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(leader))
        for _ in range(5):
            assert stub.Metadata(broker_pb2.MetadataRequest(), timeout=5).brokers
        refused = [c for c in calls if c.done() and c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) == 150 - 32, len(refused)          # at most 32 client streams at once
        stop.set()
        assert h.wait_for(lambda: all(c.done() for c in calls), timeout=20, what="the streams to end")
        # the slots are free again: a real producer connects and writes
        md = h.new_topic(rt.bootstrap_all(), "after-idle")
        pid, epoch = h.init_pid(h.leader_address(md, "after-idle"))
        r = list(broker_pb2_grpc.BrokerStub(channels[0]).ProduceStream(iter([broker_pb2.ProduceRequest(
            acks=-1, partitions=[broker_pb2.PartitionProduceData(topic="after-idle", partition=0,
                                                                 batch=h.batch(pid, epoch, 0, 2))])]), timeout=10))
        assert r[0].partitions[0].error == 0
    finally:
        stop.set()
        for ch in channels:
            ch.close()


def test_joins_waiting_for_a_rebalance_cannot_take_every_thread(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()

    def coordinator():
        r = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(boot)).FindCoordinator(
            broker_pb2.FindCoordinatorRequest(key_type=broker_pb2.GROUP, key="held"), timeout=5)
        return r if r.error == 0 else None
    c = h.wait_for(coordinator, what="a group coordinator")
    addr = f"{c.host}:{c.port}"
    join = broker_pb2.JoinGroupRequest(group_id="held", session_timeout_ms=60000, rebalance_timeout_ms=60000,
                                       protocol_type="consumer", topics=["t"])
    stub = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(addr))
    first = stub.JoinGroup(join, timeout=10)                  # a member that will never rejoin
    assert first.error == 0
    channels = [grpc.insecure_channel(addr) for _ in range(4)]
    try:                                                      # every later join waits for it (up to 60 s)
        joins = [broker_pb2_grpc.BrokerStub(channels[i % 4]).JoinGroup.future(join, timeout=90) for i in range(40)]
        time.sleep(2)
        for _ in range(5):
            assert stub.Metadata(broker_pb2.MetadataRequest(), timeout=5).brokers
        refused = [f for f in joins if f.done() and f.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) == 40 - 16, len(refused)          # at most 16 joins held at once
        for f in joins:
            f.cancel()
    finally:
        for ch in channels:
            ch.close()
