"""The `pid` workload: producer-id allocations, recorded so the checker can judge their uniqueness.

Each client thread, in a seeded mix, allocates producer ids three ways:
- "broker": InitProducerId without a transactional.id at one broker (ids from
  the broker's block, which it gets from the active controller's
  ProducerIdManager, a compare-and-set in ZooKeeper);
- "coordinator": InitProducerId at the transaction coordinator for one of
  the thread's own transactional ids (workload.tids per thread; one thread
  per id, so its inits are sequential and each has a higher epoch, or a new
  id once the epoch is exhausted);
- "idempotent": a new idempotent KafkaProducer sends one record (a send op,
  as in the queue workload) and is closed.
The controllers run with a small block (--pid-block-size=workload default 20,
see `controller_args`) so blocks change hands often under controller and
ZooKeeper faults.

Guarantees: every allocation is an `init-producer` op (or the send op of the
idempotent producer) whose ok carries `producer` {pid, epoch, session,
transactional_id} with a session of its own, so the checker's pid-reuse
analysis sees any id handed to two sessions (two transactional ids, or two
idempotent producers), except the same transactional.id at higher epochs,
which is Kafka's fence. A failed allocation is `fail` / `info` by the errors
table. Final reads read the idempotent producers' topic back.
"""
from __future__ import annotations

import itertools
import random

import grpc

from clients.admin import create_topic
from clients.coordinator import CoordinatorClient
from eoslab.common.errors import E, KafkaError
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster.workloads.base import Workload, final_read, outcome, producer_field
from eoslab.v1 import broker_pb2

PID_BLOCK_SIZE = 20


class PidWorkload(Workload):
    name = "pid"
    transactional = True                       # allocations through the transaction coordinators too
    controller_args = (f"--pid-block-size={PID_BLOCK_SIZE}",)
    OPTIONS = {"tids": (int, 2), "broker-ratio": (float, 0.5), "coordinator-ratio": (float, 0.35)}

    def setup(self) -> None:
        md = ClusterMetadata(self.bootstrap)
        try:
            create_topic(md, self.topic, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def transactional_ids(self) -> list[str]:
        return [self._tid(s, j) for s in range(self.concurrency) for j in range(self.options["tids"])]

    def _tid(self, slot: int, j: int) -> str:
        return f"{self.topic}-p{slot}-{j}"

    def start(self) -> None:
        for i in range(self.concurrency):
            self.spawn(self._client, i, name=f"pid-{i}")

    def _client(self, slot: int) -> None:
        rng = random.Random(self.seed * 1000 + slot)
        process = slot
        sessions = itertools.count(1)
        md = ClusterMetadata(self.bootstrap)
        coordinators = {self._tid(slot, j): CoordinatorClient(md, broker_pb2.TRANSACTION, self._tid(slot, j))
                        for j in range(self.options["tids"])}
        try:
            while not self.stop.is_set():
                x = rng.random()
                session = f"{self.topic}:s{slot}-{next(sessions)}"
                if x < self.options["broker-ratio"]:
                    t = self._broker(process, md, session)
                elif x < self.options["broker-ratio"] + self.options["coordinator-ratio"] and coordinators:
                    tid = rng.choice(sorted(coordinators))
                    t = self._coordinator(process, coordinators[tid], tid, session)
                else:
                    t = self._idempotent(process, session, rng.randrange(self.partitions))
                if t == "info":
                    process = self.new_process()
                if t != "ok":
                    self.stop.wait(0.1)
        finally:
            md.close()

    def _broker(self, process: int, md: ClusterMetadata, session: str) -> str:
        addr = md.addresses()[0]
        self.history.invoke(process, "init-producer", None, via=addr)
        try:
            r = md.stub(addr).InitProducerId(broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1),
                                             timeout=self.op_timeout + 5)
            if r.error != E.NONE:
                raise KafkaError(r.error, f"InitProducerId at {addr}")
        except grpc.RpcError as e:
            return self._failed(process, KafkaError(E.NETWORK_EXCEPTION, e.code().name), via=addr)
        except Exception as e:  # noqa: BLE001
            return self._failed(process, e, via=addr)
        self.history.complete(process, "ok", "init-producer", None, via=addr,
                              producer=producer_field(r.producer_id, r.producer_epoch, session, None))
        return "ok"

    def _coordinator(self, process: int, cc: CoordinatorClient, tid: str, session: str) -> str:
        req = broker_pb2.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                               producer_id=-1, producer_epoch=-1)
        self.history.invoke(process, "init-producer", None, transactional_id=tid)
        try:
            r = cc.call(lambda a: cc.txn_stub().InitProducerId(req, timeout=5), self.op_timeout)
            if r.error != E.NONE:
                raise KafkaError(r.error, f"InitProducerId for {tid!r}")
        except Exception as e:  # noqa: BLE001
            if isinstance(e, KafkaError):
                e.maybe_applied = cc.unanswered > 0
            return self._failed(process, e, transactional_id=tid)
        self.history.complete(process, "ok", "init-producer", None,
                              producer=producer_field(r.producer_id, r.producer_epoch, session, tid))
        return "ok"

    def _failed(self, process: int, e: BaseException, **extra) -> str:
        t, err = outcome(e)
        self.history.complete(process, t, "init-producer", None, error=err, **extra)
        return t

    def _idempotent(self, process: int, session: str, k: int) -> str:
        props = self.client_props()
        producer = KafkaProducer(self.bootstrap, ProducerConfig.from_props(props))
        v = self.next_value()
        self.history.invoke(process, "send", [["send", k, v]])
        try:
            m = producer.send(self.topic, str(v).encode(), partition=k).result(timeout=self.op_timeout + 5)
        except Exception as e:  # noqa: BLE001
            t, err = outcome(e)
            self.history.complete(process, t, "send", [["send", k, v]], error=err)
            return t
        finally:
            producer.close(2)
        off = m.offset if m.offset >= 0 else None
        self.history.complete(process, "ok", "send", [["send", k, [off, v] if off is not None else v]],
                              producer=producer_field(m.producer_id, m.producer_epoch, session, None),
                              seq=[m.base_sequence])
        return "ok"

    def final_reads(self, timeout: float = 60.0) -> int:
        keys = {(self.topic, p): p for p in range(self.partitions)}
        n, _ = final_read(self.bootstrap, self.history, keys, "read_uncommitted", timeout)
        return n
