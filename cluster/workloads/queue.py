"""The `queue` workload: concurrent sends and polls over keys mapped to partitions.

Guarantees: every send carries a value unique in the run; each client
process records `invoke` before it acts and exactly one completion after:
`ok` with the offset, `fail` only for errors the errors table calls
definite, `info` otherwise (timeouts, lost connections, NOT_LEADER_OR_FOLLOWER);
after an `info` the process is retired and its thread continues as a new
process (Jepsen's rule: an indeterminate op may still take effect later).
`final_reads` polls every partition from the beginning up to its end offset,
so every acknowledged record is accounted for in the history.
Ops follow Jepsen's Kafka workload shape: send [["send", k, v]] completing as
[["send", k, [offset, v]]]; poll completing as [["poll", {k: [[offset, v], ...]}]];
k is the partition number. With `client` set to a real Kafka client
(confluent-kafka, kafka-python, aiokafka; `eoslab run --client`), its sends and polls
go through that client over the brokers' Kafka listeners, with the same ops
and the same fail/info rule; final reads stay with the lab's consumer.

Two settings aim the workload at producer-side anomalies (defaults: neither):
- `workload.producers=N`: the processes share N producer instances (process
  slot i uses instance i mod N), so one producer has as many sends in flight
  as processes wait on it, up to max.in.flight.requests.per.connection per
  broker: what six in flight with a lost first ACK needs.
- `workload.resend=restart`: an application that, when a send ends without
  an answer (info), restarts its producer (a new instance, so without a
  transactional.id a new producer id) and sends the same value again as a
  new op: an at-least-once application, where a duplicate is the expected
  result when the first copy was written.
"""
from __future__ import annotations

import itertools
import random
import threading

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster.workloads.base import Workload, by_key, final_read, outcome, producer_field


class QueueWorkload(Workload):
    name = "queue"
    clients = ("eoslab", "confluent-kafka", "kafka-python", "aiokafka")   # `eoslab run --client`
    OPTIONS = {"producers": (int, 0), "resend": (("none", "restart"), "none")}

    def __init__(self, bootstrap: str, history, seed: int, topic: str = "queue", partitions: int = 3,
                 concurrency: int = 4, producer_props: dict | None = None, topic_configs: dict | None = None,
                 replication_factor: int = 0, send_ratio: float = 0.7, op_timeout: float = 10.0,
                 client: str = "eoslab", kafka_bootstrap: str = "", **kw):
        super().__init__(bootstrap, history, seed, topic, partitions, concurrency, producer_props, topic_configs,
                         replication_factor, op_timeout, **kw)
        self.send_ratio = send_ratio
        self.client = client                  # eoslab, or a real Kafka client (cluster/workloads/real_clients.py)
        self.kafka_bootstrap = kafka_bootstrap
        self.shared = self.options["producers"]
        self.resend = self.options["resend"] == "restart"
        self._pool: dict[int, tuple[KafkaProducer, str]] = {}
        self._pool_lock = threading.Lock()
        self._pool_sessions = itertools.count(1)

    @classmethod
    def check_options(cls, options: dict) -> dict:
        if options["producers"] and options["resend"] == "restart":
            raise ValueError("workload.resend=restart restarts a process's own producer: "
                             "it cannot go with workload.producers")
        return options

    def setup(self) -> None:
        md = ClusterMetadata(self.bootstrap)
        try:
            create_topic(md, self.topic, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def start(self) -> None:
        for i in range(self.concurrency):
            self.spawn(self._client, i, name=f"client-{i}")

    def _new_producer(self) -> KafkaProducer:
        props = self.client_props()
        if self.client != "eoslab":
            from cluster.workloads.real_clients import make_producer
            return make_producer(self.client, self.kafka_bootstrap, props)
        return KafkaProducer(self.bootstrap, ProducerConfig.from_props(props))

    def _new_consumer(self):
        if self.client != "eoslab":
            from cluster.workloads.real_clients import make_consumer
            return make_consumer(self.client, self.kafka_bootstrap)
        return KafkaConsumer(self.bootstrap)

    def _shared(self, slot: int, failed: KafkaProducer | None = None) -> tuple[KafkaProducer, str]:
        """The shared instance for this slot; a new one replaces `failed` (fatal) once, for every sharer."""
        j = slot % self.shared
        with self._pool_lock:
            cur = self._pool.get(j)
            if cur is None or cur[0] is failed:
                if cur is not None:
                    cur[0].close(0)
                cur = (self._new_producer(), f"shared{j}-{next(self._pool_sessions)}")
                self._pool[j] = cur
            return cur

    def _client(self, slot: int) -> None:
        rng = random.Random(self.seed * 1000 + slot)
        process = slot
        sessions = itertools.count(1)
        if self.shared:
            producer, session = self._shared(slot)
        else:
            session = f"p{slot}-{next(sessions)}"       # one per producer instance (checker contract)
            producer = self._new_producer()
        consumer = self._new_consumer()
        consumer.assign([(self.topic, p) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                if rng.random() < self.send_ratio:
                    k, v = rng.randrange(self.partitions), self.next_value()
                    result = self._send(process, producer, session, k, v)
                    while result == "info" and self.resend and not self.stop.is_set():
                        process += self.concurrency      # the restarted application is a new process
                        producer.close(0)                # a crash: nothing of the old instance is flushed
                        producer = self._new_producer()
                        session = f"p{slot}-{next(sessions)}"
                        result = self._send(process, producer, session, k, v)
                    if producer.transaction_manager.fatal_error is not None:
                        if self.shared:
                            producer, session = self._shared(slot, failed=producer)
                        else:
                            producer.close(5)
                            producer = self._new_producer()
                            session = f"p{slot}-{next(sessions)}"
                else:
                    result = self._poll(process, consumer)
                if result == "info":
                    process += self.concurrency      # retire the process, as Jepsen does
        finally:
            if not self.shared:
                producer.close(5)
            consumer.close()

    def _send(self, process: int, producer: KafkaProducer, session: str, k: int, v: int) -> str:
        self.history.invoke(process, "send", [["send", k, v]])
        try:
            m = producer.send(self.topic, str(v).encode(), partition=k).result(timeout=self.op_timeout)
        except Exception as e:  # noqa: BLE001 - the errors table decides; anything unforeseen is indefinite
            t, err = outcome(e)
            self.history.complete(process, t, "send", [["send", k, v]], error=err)
            return t
        self.history.complete(process, "ok", "send", [["send", k, [m.offset, v]]],
                              producer=producer_field(m.producer_id, m.producer_epoch, session, None),
                              seq=[m.base_sequence])
        return "ok"

    def _poll(self, process: int, consumer: KafkaConsumer) -> str:
        self.history.invoke(process, "poll", [["poll"]])
        try:
            records = consumer.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001 - a poll that failed read nothing
            self.history.complete(process, "fail", "poll", [["poll"]], error=type(e).__name__)
            return "fail"
        self.history.complete(process, "ok", "poll", [["poll", by_key(records)]])
        return "ok"

    def halt(self, timeout: float = 60.0) -> None:
        super().halt(timeout)
        with self._pool_lock:
            for producer, _ in self._pool.values():
                producer.close(5)
            self._pool.clear()

    def final_reads(self, timeout: float = 60.0) -> int:
        """Read every partition from the beginning to its end offset, recorded as polls."""
        keys = {(self.topic, p): p for p in range(self.partitions)}
        n, _ = final_read(self.bootstrap, self.history, keys, "read_uncommitted", timeout)
        return n
