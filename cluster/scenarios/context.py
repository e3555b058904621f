"""What a scenario's drive(ctx) works with: the running cluster, the history, clients, faults.

Guarantees: every fault a scenario applies through the context (lost ACKs,
kill, pause, resume, start, a held-back request) is recorded as a nemesis
info pair (`start-X`/`stop-X`, or the action's name) in the same history as
the clients' ops; waits are on conditions (the broker dropped the answer, the
ISR shrank, a new leader acts as leader), each with a deadline and a
readable error; every client the context made is closed or killed by
`close()`, also after an error. Values are unique per scenario.
"""
from __future__ import annotations

import itertools
import time

import grpc

from clients.admin import create_topic
from eoslab.common.errors import E
from clients.metadata import ClusterMetadata
from cluster.scenarios import record
from eoslab.v1 import (broker_pb2, controller_pb2, controller_pb2_grpc, faults_pb2, faults_pb2_grpc, txn_pb2,
                       txn_pb2_grpc)
from eoslab.common import rpc


class ScenarioError(RuntimeError):
    """The scenario could not play its schedule (a condition never came): an error, not a verdict."""


class Context:
    def __init__(self, runtime, history, kafka_version: str | None = None):
        self.rt = runtime
        self.kafka_version = kafka_version
        self.history = history
        self.bootstrap = runtime.bootstrap_all()
        self.md = ClusterMetadata(self.bootstrap)
        self._values = itertools.count(1)
        self._clients: list = []

    # -- values and clients ------------------------------------------------------------------------
    def values(self, n: int) -> list[int]:
        return [next(self._values) for _ in range(n)]

    def _for_version(self, config: dict) -> dict:
        """The producer config as a user of the scenario's Kafka release writes it: that release, and
        on 0.11 one request in flight (all 0.11 allows an idempotent producer) unless set."""
        if not self.kafka_version:
            return config
        from eoslab import kafka_version as kv
        v = kv.get(self.kafka_version)
        config.setdefault("kafka_version", v.name)
        if v.required_max_in_flight is not None:
            config.setdefault("max_in_flight", v.required_max_in_flight)
        return config

    def producer(self, **config):
        from clients.producer import KafkaProducer, ProducerConfig
        p = KafkaProducer(self.bootstrap, ProducerConfig(**self._for_version(config)))
        self._clients.append(p)
        return p

    def worker(self, **config):
        """A producer in its own process (cluster.scenarios.worker), so it can be killed or paused."""
        from cluster.scenarios.worker import WorkerProducer
        w = WorkerProducer(self.bootstrap, self._for_version(config))
        self._clients.append(w)
        return w

    def send(self, process, producer, session: str, topic: str, writes) -> record.SendOp:
        return record.SendOp(self.history, process, producer, session, topic, writes)

    def txn(self, process, producer, session: str, topic: str, writes) -> record.Txn:
        return record.Txn(self.history, process, producer, session, topic, writes)

    def init_producer(self, process, producer, session: str) -> dict:
        return record.init_producer(self.history, process, producer, session)

    def read_all(self, topic: str, partitions: int = 1, isolation: str = "read_uncommitted",
                 process: int = 100) -> int:
        if isolation == "read_committed":
            self.wait_stable(topic, partitions)
        return record.poll_all(self.history, process, self.bootstrap, topic, partitions, isolation)

    def close(self) -> None:
        for c in reversed(self._clients):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing must not hide the scenario's error
                pass
        self._clients.clear()
        self.md.close()

    # -- waiting -----------------------------------------------------------------------------------
    def wait(self, cond, what: str, timeout: float = 30.0, every: float = 0.05):
        deadline = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > deadline:
                raise ScenarioError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(every)

    # -- topics and leaders ------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        create_topic(self.md, name, partitions, configs=configs)

    def leader(self, topic: str, partition: int = 0, timeout: float = 30.0) -> tuple[str, str]:
        """(node name, address) of the partition's leader, once that broker acts as leader."""
        def acting():
            try:
                self.md.refresh([topic])
            except Exception:  # noqa: BLE001 - mid-election
                return None
            ld = self.md.leader(topic, partition)
            if ld is None:
                return None
            try:
                r = self.md.stub(ld[1]).ListOffsets(broker_pb2.ListOffsetsRequest(partitions=[
                    broker_pb2.ListOffsetsPartition(topic=topic, partition=partition, timestamp=-1)]), timeout=5)
            except grpc.RpcError:
                return None
            return (f"broker-{ld[0]}", ld[1]) if r.partitions[0].error == E.NONE else None
        return self.wait(acting, f"a leader of {topic}-{partition}", timeout)

    def partition_state(self, topic: str, partition: int = 0):
        """The active controller's view (leader, leader_epoch, isr), or None."""
        for n in self.rt.info().by_role("controller"):
            if n.state != "running":
                continue
            try:
                with rpc.channel(n.address) as ch:
                    r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(
                        controller_pb2.DescribeClusterRequest(), timeout=2)
            except grpc.RpcError:
                continue
            if r.error == 0:
                for s in r.partition_states:
                    if (s.topic, s.partition) == (topic, partition):
                        return s
        return None

    def wait_stable(self, topic: str, partitions: int = 1, timeout: float = 20.0) -> bool:
        """Until no transaction is open on the partitions (last stable offset = high watermark)."""
        from clients.consumer import KafkaConsumer
        tps = [(topic, p) for p in range(partitions)]

        def stable():
            ends = []
            for iso in ("read_committed", "read_uncommitted"):
                c = KafkaConsumer(self.bootstrap, isolation_level=iso)
                try:
                    ends.append(c.end_offsets(tps))
                finally:
                    c.close()
            return ends[0] == ends[1]
        try:
            return self.wait(stable, f"{topic} to become stable", timeout, every=0.1)
        except ScenarioError:
            return False

    # -- faults (each recorded as a nemesis op) ------------------------------------------------------
    def nemesis(self, f: str, value, result=None) -> None:
        self.history.nemesis(f, value, result)

    def drop_acks(self, topic: str, partition: int = 0, count: int = 1, skip: int = 0) -> str:
        """The leader will append the next `count` produce requests of the partition and lose their answers."""
        node, address = self.leader(topic, partition)
        faults_pb2_grpc.FaultInjectorStub(rpc.channel(address)).InjectFault(faults_pb2.InjectFaultRequest(
            drop_produce_responses=faults_pb2.DropProduceResponses(topic=topic, partition=partition, skip=skip,
                                                                   count=count)), timeout=5)
        self.nemesis("start-lost-ack", {"node": node, "topic": topic, "partition": partition, "count": count,
                                        "skip": skip})
        return address

    def acks_dropped(self, address: str) -> int:
        r = faults_pb2_grpc.FaultInjectorStub(rpc.channel(address)).ListFaults(faults_pb2.ListFaultsRequest(),
                                                                                timeout=5)
        return sum(f.applied for f in r.faults)

    def wait_acks_dropped(self, address: str, n: int, timeout: float = 30.0) -> None:
        self.wait(lambda: self.acks_dropped(address) >= n, f"the leader to drop {n} produce answer(s)", timeout)
        self.nemesis("stop-lost-ack", {"dropped": n})

    def kill(self, node: str) -> None:
        self.rt.kill(node)
        self.nemesis("kill", node)

    def pause(self, node: str) -> None:
        self.rt.pause(node)
        self.nemesis("start-pause", node)

    def resume(self, node: str) -> None:
        self.rt.resume(node)
        self.nemesis("stop-pause", node)

    def start(self, node: str) -> None:
        self.rt.start(node)
        self.nemesis("start", node)

    # -- transaction coordinators ------------------------------------------------------------------
    def coordinator(self, transactional_id: str) -> txn_pb2_grpc.TransactionCoordinatorStub:
        def find():
            try:
                r = self.md.stub(self.md.any_broker()).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                    key_type=broker_pb2.TRANSACTION, key=transactional_id), timeout=5)
            except grpc.RpcError:
                return None
            return f"{r.host}:{r.port}" if r.error == E.NONE else None
        address = self.wait(find, f"the coordinator of {transactional_id!r}")
        return txn_pb2_grpc.TransactionCoordinatorStub(rpc.channel(address))

    def transaction_state(self, transactional_id: str):
        """The coordinator's TransactionStateDescription of the id, or None when it holds none."""
        r = self.coordinator(transactional_id).DescribeTransactions(
            txn_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]), timeout=5)
        for t in r.transactions:
            if t.transactional_id == transactional_id:
                return t
        return None
