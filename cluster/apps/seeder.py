"""The app run's own clients: the seeder writes the input, the tail reader watches the output appear.

Guarantees: `Seeder` sends input records 0..records-1 (cluster.apps.contract's
keys, values and partitions) with the lab's idempotent producer (acks=all)
at `rate` records per second, one history op of process "seeder" per batch
sent together: `ok` with each record's offset when every record of the batch
was acknowledged, `info` (it may or may not have been written) otherwise;
never `fail`, since the lab's producer cannot tell a definite failure of a
whole batch. `TailReader` polls every output partition from offset 0 at
read_committed through the run, one ok op of process "reader" per poll that
returned records (value [["poll", {"out-<p>": [[offset, value], ...]}]], as
the queue workload records polls), so the time a record became visible is
in the history; it keeps the count of records seen for the harness's drain
rule. Values are decoded as UTF-8 with backslash escapes, so output that is
not text is still recorded, and judged as unexpected.
"""
from __future__ import annotations

import threading
import time

from clients.consumer import KafkaConsumer
from clients.producer import KafkaProducer, ProducerConfig
from cluster.apps.contract import input_record

BATCH_INTERVAL_S = 0.05
ACK_TIMEOUT_S = 60.0


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="backslashreplace")


class Seeder(threading.Thread):
    def __init__(self, bootstrap: str, history, topic: str, partitions: int, records: int, keys: int,
                 rate: float):
        super().__init__(name="app-seeder", daemon=True)
        self.bootstrap, self.history, self.topic = bootstrap, history, topic
        self.partitions, self.records, self.keys, self.rate = partitions, records, keys, rate
        self.stopping = threading.Event()
        self.sent = 0
        self.acknowledged = 0
        self.acked_values: set[str] = set()
        self.first_ack: float | None = None
        self.error: str | None = None

    def run(self) -> None:
        producer = KafkaProducer(self.bootstrap, ProducerConfig.from_props(
            {"enable.idempotence": "true", "acks": "all", "linger.ms": "5", "delivery.timeout.ms": "120000"}))
        t0 = time.monotonic()
        try:
            while self.sent < self.records and not self.stopping.is_set():
                due = min(self.records, int((time.monotonic() - t0) * self.rate) + 1)
                if due > self.sent:
                    self._batch(producer, range(self.sent, due))
                else:
                    self.stopping.wait(BATCH_INTERVAL_S)
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            producer.close(10)

    def _batch(self, producer: KafkaProducer, ids: range) -> None:
        recs = [input_record(i, self.keys, self.partitions) for i in ids]
        invoke = [["send", f"in-{p}", text(v)] for p, _, v in recs]
        self.history.invoke("seeder", "send", invoke)
        futures = [producer.send(self.topic, v, key=k, partition=p) for p, k, v in recs]
        self.sent = ids.stop
        done = []
        for (p, _, v), fut in zip(recs, futures):
            try:
                md = fut.result(ACK_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - not acknowledged: unknown whether it was written
                self.history.complete("seeder", "info", "send", invoke)
                return
            done.append(["send", f"in-{p}", [md.offset, text(v)]])
        self.acked_values.update(m[2][1] for m in done)
        self.acknowledged += len(done)
        if self.first_ack is None:
            self.first_ack = time.monotonic()
        self.history.complete("seeder", "ok", "send", done)


class TailReader(threading.Thread):
    def __init__(self, bootstrap: str, history, topic: str, partitions: int):
        super().__init__(name="app-tail-reader", daemon=True)
        self.bootstrap, self.history, self.topic, self.partitions = bootstrap, history, topic, partitions
        self.stopping = threading.Event()
        self.seen = 0
        self.values: set[str] = set()
        self.last_seen = time.monotonic()

    def run(self) -> None:
        tps = [(self.topic, p) for p in range(self.partitions)]
        consumer = KafkaConsumer(self.bootstrap, isolation_level="read_committed")
        try:
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            while not self.stopping.is_set():
                try:
                    records = consumer.poll(timeout_ms=500)
                except Exception:  # noqa: BLE001 - a fault in force: poll again
                    self.stopping.wait(0.5)
                    continue
                if not records:
                    continue
                by = {}
                for r in records:
                    by.setdefault(f"out-{r.partition}", []).append([r.offset, text(r.value)])
                self.history.invoke("reader", "poll", [["poll"]], isolation="read_committed")
                self.history.complete("reader", "ok", "poll", [["poll", by]], isolation="read_committed")
                self.seen += len(records)
                self.values.update(text(r.value) for r in records)
                self.last_seen = time.monotonic()
        finally:
            consumer.close()
