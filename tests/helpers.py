"""Small helpers for tests that talk to a real cluster over the wire."""
from __future__ import annotations

import importlib.util
import os
import time

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2, broker_pb2_grpc, faults_pb2, faults_pb2_grpc
from eoslab.common import record_batch as rb
from eoslab.common import rpc


def new_topic(bootstrap: str, name: str, partitions: int = 1, configs=None) -> ClusterMetadata:
    md = ClusterMetadata(bootstrap)
    create_topic(md, name, partitions, configs=configs)
    return md


def leader_address(md: ClusterMetadata, topic: str, partition: int = 0, timeout: float = 30.0) -> str:
    """The leader's address, once that broker itself acts as leader (metadata can run ahead of
    the LeaderAndIsr that makes it one)."""
    import grpc
    deadline = time.monotonic() + timeout
    while True:
        md.refresh([topic])
        ld = md.leader(topic, partition)
        if ld is not None:
            try:
                r = broker_stub(ld[1]).ListOffsets(broker_pb2.ListOffsetsRequest(partitions=[
                    broker_pb2.ListOffsetsPartition(topic=topic, partition=partition, timestamp=-1)]), timeout=5)
                if r.partitions[0].error == 0:
                    return ld[1]
            except grpc.RpcError:
                pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no leader for {topic}-{partition}")
        time.sleep(0.1)


def broker_stub(address: str) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(rpc.channel(address))


def drop_responses(address: str, topic: str, partition: int = 0, count: int = 1, skip: int = 0) -> None:
    faults_pb2_grpc.FaultInjectorStub(rpc.channel(address)).InjectFault(faults_pb2.InjectFaultRequest(
        drop_produce_responses=faults_pb2.DropProduceResponses(topic=topic, partition=partition, skip=skip,
                                                               count=count)), timeout=5)


def faults_applied(address: str) -> int:
    r = faults_pb2_grpc.FaultInjectorStub(rpc.channel(address)).ListFaults(faults_pb2.ListFaultsRequest(),
                                                                            timeout=5)
    return sum(f.applied for f in r.faults)


def init_pid(address: str, attempts: int = 20) -> tuple[int, int]:
    """InitProducerId, retried like a client retries a transient error (a busy or restarting broker)."""
    import grpc
    for i in range(attempts):
        try:
            r = broker_stub(address).InitProducerId(
                broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=10)
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) or i == attempts - 1:
                raise
            time.sleep(0.2)
            continue
        if r.error == 14 and i < attempts - 1:      # COORDINATOR_LOAD_IN_PROGRESS: no id block yet
            time.sleep(0.2)
            continue
        assert r.error == 0, r
        return r.producer_id, r.producer_epoch
    raise AssertionError("InitProducerId kept failing")


def produce_raw(address: str, topic: str, batch, partition: int = 0, acks: int = -1, timeout_ms: int = 0):
    """One Produce; `timeout_ms` is the request's own wait for acks (0: the broker's 30 s, past this call's
    10 s deadline, so a test whose append may wait on an ISR that cannot catch up passes a shorter one)."""
    r = broker_stub(address).Produce(broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms, partitions=[
        broker_pb2.PartitionProduceData(topic=topic, partition=partition, batch=batch)]), timeout=10)
    return r.partitions[0]


def values(n: int, start: int = 0, prefix: str = "v") -> list[tuple[None, bytes, int]]:
    return [(None, f"{prefix}{i}".encode(), 0) for i in range(start, start + n)]


def batch(pid: int, epoch: int, seq: int, n: int, start: int = 0, prefix: str = "v"):
    return rb.build_batch(values(n, start, prefix), producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def high_watermark(address: str, topic: str, partition: int = 0) -> int:
    """The high watermark the leader at `address` answers (ListOffsets latest, read_uncommitted); -1 on error."""
    r = broker_stub(address).ListOffsets(broker_pb2.ListOffsetsRequest(partitions=[
        broker_pb2.ListOffsetsPartition(topic=topic, partition=partition, timestamp=-1)]), timeout=5)
    p = r.partitions[0]
    return p.offset if p.error == 0 else -1


def read_partition(bootstrap: str, topic: str, partition: int = 0):
    c = KafkaConsumer(bootstrap)
    try:
        return c.read_all([(topic, partition)])
    finally:
        c.close()


def wait_for(cond, timeout: float = 30.0, what: str = "condition"):
    """Poll `cond` every 0.1 s until it returns something truthy (returned); AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def broker_epoch(rt, broker_id: int) -> int:
    """The broker's registration epoch (its znode's czxid), read as a cluster member reads ZooKeeper: what
    a request the broker sends to the controller (AlterPartition) must carry."""
    from kazoo.client import KazooClient
    from eoslab.common import auth
    zk = KazooClient(hosts=rt.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
    zk.start()
    try:
        return zk.get(f"/brokers/ids/{broker_id}")[1].czxid
    finally:
        zk.stop()
        zk.close()


def script_module(*path: str):
    """A script of the repository that is not a package module (bench/NAME.py, tools/NAME.py), loaded
    by path, e.g. script_module("bench", "false_alarms.py")."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("_".join(path).removesuffix(".py"), os.path.join(root, *path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def offsets_leader(data_dir: str, *known: tuple[str, int]):
    """Broker 1 in process leading __consumer_offsets-0 alone (a real ReplicaManager on `data_dir`, a mock
    clock), its metadata cache knowing that partition and the `known` (topic, partition)s: (metadata cache,
    replica manager). The caller shuts the replica manager down."""
    from eoslab.common.errors import E
    from eoslab.common.time import MockTime
    from services.broker.log_config import LogConfig
    from services.broker.metadata_cache import MetadataCache
    from services.broker.replica_manager import ReplicaManager
    offsets = "__consumer_offsets"
    md = MetadataCache()
    md.update(broker_pb2.UpdateMetadataRequest(partition_states=[
        broker_pb2.PartitionState(topic=t, partition=p, leader=1, replicas=[1]) for t, p in ((offsets, 0), *known)]))
    rm = ReplicaManager(1, str(data_dir), LogConfig(), md, time=MockTime())
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic=offsets, partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1])
    assert rm.become_leader_or_follower(req).error == E.NONE
    return md, rm
