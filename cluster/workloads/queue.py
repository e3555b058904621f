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
k is the partition number.
"""
from __future__ import annotations

import itertools
import random
import threading
import time

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.errors import KafkaError
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig


class QueueWorkload:
    name = "queue"

    def __init__(self, bootstrap: str, history, seed: int, topic: str = "queue", partitions: int = 3,
                 concurrency: int = 4, producer_props: dict | None = None, topic_configs: dict | None = None,
                 replication_factor: int = 0, send_ratio: float = 0.7, op_timeout: float = 10.0):
        self.bootstrap = bootstrap
        self.history = history
        self.seed = seed
        self.topic = topic
        self.partitions = partitions
        self.concurrency = concurrency
        self.producer_props = dict(producer_props or {})
        self.topic_configs = dict(topic_configs or {})
        self.replication_factor = replication_factor
        self.send_ratio = send_ratio
        self.op_timeout = op_timeout
        self.values = itertools.count(1)
        self.values_lock = threading.Lock()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def setup(self) -> None:
        md = ClusterMetadata(self.bootstrap)
        try:
            create_topic(md, self.topic, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def _next_value(self) -> int:
        with self.values_lock:
            return next(self.values)

    def start(self) -> None:
        for i in range(self.concurrency):
            t = threading.Thread(target=self._client, args=(i,), name=f"client-{i}", daemon=True)
            t.start()
            self.threads.append(t)

    def halt(self, timeout: float = 60.0) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout)

    def _new_producer(self) -> KafkaProducer:
        props = {"linger.ms": "0", "request.timeout.ms": "3000", "delivery.timeout.ms": str(int(self.op_timeout * 1000))}
        props.update(self.producer_props)
        return KafkaProducer(self.bootstrap, ProducerConfig.from_props(props))

    def _client(self, slot: int) -> None:
        rng = random.Random(self.seed * 1000 + slot)
        process = slot
        sessions = itertools.count(1)
        session = f"p{slot}-{next(sessions)}"       # one per producer instance (checker contract)
        producer = self._new_producer()
        consumer = KafkaConsumer(self.bootstrap)
        consumer.assign([(self.topic, p) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                if rng.random() < self.send_ratio:
                    outcome = self._send(process, producer, session, rng.randrange(self.partitions))
                    if producer.transaction_manager.fatal_error is not None:
                        producer.close(5)
                        producer = self._new_producer()
                        session = f"p{slot}-{next(sessions)}"
                else:
                    outcome = self._poll(process, consumer)
                if outcome == "info":
                    process += self.concurrency      # retire the process, as Jepsen does
        finally:
            producer.close(5)
            consumer.close()

    def _send(self, process: int, producer: KafkaProducer, session: str, k: int) -> str:
        v = self._next_value()
        self.history.invoke(process, "send", [["send", k, v]])
        try:
            m = producer.send(self.topic, str(v).encode(), partition=k).result(timeout=self.op_timeout)
        except KafkaError as e:
            t = "fail" if e.definite else "info"
            self.history.complete(process, t, "send", [["send", k, v]], error=e.name)
            return t
        except Exception as e:  # noqa: BLE001 - timeouts and anything unforeseen are indefinite
            self.history.complete(process, "info", "send", [["send", k, v]], error=type(e).__name__)
            return "info"
        self.history.complete(process, "ok", "send", [["send", k, [m.offset, v]]],
                              producer={"pid": m.producer_id, "epoch": m.producer_epoch, "session": session,
                                        "transactional_id": None},
                              seq=[m.base_sequence])
        return "ok"

    def _poll(self, process: int, consumer: KafkaConsumer) -> str:
        self.history.invoke(process, "poll", [["poll"]])
        try:
            records = consumer.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001 - a poll that failed read nothing
            self.history.complete(process, "fail", "poll", [["poll"]], error=type(e).__name__)
            return "fail"
        self.history.complete(process, "ok", "poll", [["poll", _by_key(records)]])
        return "ok"

    def final_reads(self, timeout: float = 60.0) -> int:
        """Read every partition from the beginning to its end offset, recorded as polls."""
        process = "final"
        consumer = KafkaConsumer(self.bootstrap)
        tps = [(self.topic, p) for p in range(self.partitions)]
        n = 0
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    consumer.assign(tps)
                    consumer.seek_to_beginning(tps)
                    ends = consumer.end_offsets(tps)
                    break
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            while any(consumer.positions[tp] < ends[tp] for tp in tps):
                if time.monotonic() > deadline:
                    raise KafkaError(7, "final reads did not reach the end offsets in time")
                self.history.invoke(process, "poll", [["poll"]])
                records = consumer.poll(timeout_ms=500)
                self.history.complete(process, "ok", "poll", [["poll", _by_key(records)]], final=True)
                n += len(records)
        finally:
            consumer.close()
        return n


def _by_key(records) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault(r.partition, []).append([r.offset, int(r.value)])
    return out
