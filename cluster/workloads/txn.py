"""The `txn` workload: transactional producers sending across partitions, and polls.

Guarantees: each client thread owns one transactional.id for the whole run
(a new producer instance after a fatal or indefinite outcome inits the same
id, which fences the old instance and aborts its open transaction) and
records:
- `init-producer` after every InitProducerId: ok with `producer`
  {pid, epoch, session, transactional_id} (the checker's fence and pid-reuse
  evidence);
- f "txn" [["send", k, v], ...] (1..workload.max-sends sends to random
  partitions, values unique in the run): `ok` = committed, with the offset and
  the per-record `seq` of every send; `fail` = certainly not committed (the
  client aborted it — a fraction workload.abort-ratio of transactions is
  aborted on purpose after their records reached the log — or it failed before
  EndTxn(commit) was sent, or EndTxn got a definite error on its only
  attempt); `info` = unknown (EndTxn timed out or was retried after a lost
  answer, or an unforeseen error);
- f "poll" with `isolation` (isolation.level, read_committed by default),
  from a consumer assigned every partition.
After `info` the process is retired (a new number, as Jepsen does). Final
reads wait until no transaction is open, then read every partition at the
workload's isolation level. With `client` confluent-kafka or kafka-python
the transactions and polls go through that client over the Kafka listeners,
decided by the same rules (cluster.workloads.real_txn); producer ids, epochs
and sequences are then unknown (None).
"""
from __future__ import annotations

import itertools
import random
import time

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster.workloads.base import Workload, by_key, final_read, outcome, producer_field
from cluster.workloads.txn_ops import transaction


class TxnWorkload(Workload):
    name = "txn"
    transactional = True
    clients = ("eoslab", "confluent-kafka", "kafka-python", "aiokafka")   # `eoslab run --client`
    OPTIONS = {"abort-ratio": (float, 0.2), "max-sends": (int, 4), "send-ratio": (float, 0.6)}

    def __init__(self, *args, client: str = "eoslab", kafka_bootstrap: str = "", **kw):
        super().__init__(*args, **kw)
        self.client = client                  # eoslab, or a real Kafka client (cluster/workloads/real_clients.py)
        self.kafka_bootstrap = kafka_bootstrap

    def setup(self) -> None:
        if self.options["max-sends"] < 1:
            raise ValueError("workload.max-sends must be at least 1")
        md = ClusterMetadata(self.bootstrap)
        try:
            create_topic(md, self.topic, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def transactional_ids(self) -> list[str]:
        return [self._tid(i) for i in range(self.concurrency)]

    def _tid(self, slot: int) -> str:
        return f"{self.topic}-t{slot}"

    def start(self) -> None:
        for i in range(self.concurrency):
            self.spawn(self._client, i, name=f"txn-{i}")

    # -- producer instances ---------------------------------------------------------------------
    def _new_producer(self, slot: int) -> KafkaProducer:
        props = self.client_props(transaction_timeout_ms="10000")
        if self.client != "eoslab":
            from cluster.workloads.real_txn import make_txn_producer
            return make_txn_producer(self.client, self.kafka_bootstrap, props, self._tid(slot))
        props["transactional.id"] = self._tid(slot)
        return KafkaProducer(self.bootstrap, ProducerConfig.from_props(props))

    def _init(self, process: int, producer: KafkaProducer, session: str) -> str:
        tid = producer.config.transactional_id
        self.history.invoke(process, "init-producer", None, transactional_id=tid)
        try:
            producer.init_transactions(timeout=self.op_timeout)
        except Exception as e:  # noqa: BLE001
            t, err = outcome(e)
            self.history.complete(process, t, "init-producer", None, error=err, transactional_id=tid)
            return t
        self.history.complete(process, "ok", "init-producer", None,
                              producer=producer_field(producer.producer_id, producer.producer_epoch, session, tid))
        return "ok"

    def _client(self, slot: int) -> None:
        rng = random.Random(self.seed * 1000 + slot)
        process = slot
        sessions = itertools.count(1)
        producer, session = None, ""
        if self.client != "eoslab":
            from cluster.workloads.real_clients import make_consumer
            consumer = make_consumer(self.client, self.kafka_bootstrap, self.isolation)
        else:
            consumer = KafkaConsumer(self.bootstrap, isolation_level=self.isolation)
        consumer.assign([(self.topic, p) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                if producer is None:
                    producer, session = self._new_producer(slot), f"t{slot}-{next(sessions)}"
                    result = self._init(process, producer, session)
                    if result != "ok":
                        producer.close(1)
                        producer = None
                        process = self.new_process() if result == "info" else process
                        self.stop.wait(0.5)
                        continue
                if rng.random() < self.options["send-ratio"]:
                    result, healthy = self._txn(process, producer, session, rng)
                    if not healthy:
                        producer.close(1)
                        producer = None
                else:
                    result = self._poll(process, consumer)
                if result == "info":
                    process = self.new_process()
        finally:
            if producer is not None:
                producer.close(5)
            consumer.close()

    # -- ops ------------------------------------------------------------------------------------
    def _txn(self, process: int, producer: KafkaProducer, session: str, rng: random.Random) -> tuple[str, bool]:
        """One transaction; returns (type recorded, whether the producer can go on)."""
        n = rng.randint(1, self.options["max-sends"])
        mops = [["send", rng.randrange(self.partitions), self.next_value()] for _ in range(n)]
        abort = rng.random() < self.options["abort-ratio"]
        self.history.invoke(process, "txn", mops)
        if self.client != "eoslab":
            from cluster.workloads.real_txn import client_transaction
            r = client_transaction(producer, self.topic, mops, self.op_timeout, abort=abort)
        else:
            r = transaction(producer, self.topic, mops, self.op_timeout, abort=abort)
        self.history.complete(process, r.type, "txn", r.value, seq=r.seq, **r.extra,
                              producer=producer_field(r.pid, r.epoch, session, producer.config.transactional_id))
        return r.type, r.healthy

    def _poll(self, process: int, consumer: KafkaConsumer) -> str:
        self.history.invoke(process, "poll", [["poll"]], isolation=self.isolation)
        try:
            records = consumer.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001 - a poll that failed read nothing
            self.history.complete(process, "fail", "poll", [["poll"]], error=type(e).__name__,
                                  isolation=self.isolation)
            return "fail"
        self.history.complete(process, "ok", "poll", [["poll", by_key(records)]], isolation=self.isolation)
        return "ok"

    def final_reads(self, timeout: float = 60.0) -> int:
        keys = {(self.topic, p): p for p in range(self.partitions)}
        t0 = time.monotonic()
        n, self.unstable = final_read(self.bootstrap, self.history, keys, self.isolation, timeout,
                                      stable_timeout=min(30.0, timeout / 2))
        self.final_read_s = round(time.monotonic() - t0, 3)
        return n
