"""The `copier` workload: read-process-write from an input topic to an output topic, exactly once.

Kafka's transactions system test as a Jepsen history. Processes:
- the input producer (process 0): idempotent sends of unique values to the
  input partitions, f "send" [["send", "in-p", v]], at workload.input-rate
  records per second;
- workload.copiers copier instances (copier_instance.py), one consumer group
  with subscribe, each with a transactional.id of its own slot; every step
  is one f "txn" op (poll of "in-p" keys, sends to "out-p" keys, the group's
  offsets committed in the transaction with send_offsets_to_transaction and
  the consumer's group metadata, KIP-447);
- a reader: read_committed polls of the output (with "isolation").
The workload kills copier instances itself (workload.crash-interval seconds
apart on average, at a checkpoint drawn from the seed or fixed by
workload.crash-point) and starts a replacement in the same slot (same
transactional.id, new process, new session).

What the checker judges (run with --strict-unseen): on the output keys, a
value at two offsets is a duplicate (copied twice) and a committed copy
missing below what was read is a lost write; on the input keys, only ok
(committed) copier transactions read, so an input record below the highest
consumed offset that no committed copy read is a lost write, and one never
consumed is unseen. Final reads: first the copiers drain the input (bounded
wait until the group's committed offsets reach the input's end offsets), then
the output is read from the beginning at read_committed. The input is not
read again: its consumption is what is being checked.

With `client` confluent-kafka, kafka-python or aiokafka (`eoslab run
--client`), the input producer, the copier instances
(cluster/workloads/real_copier.py) and the reader use that client over the
Kafka listeners, with the same ops; the drain check and the final reads use
the lab's client.
"""
from __future__ import annotations

import itertools
import random
import threading
import time

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from cluster.workloads.base import Workload, by_key, final_read, outcome, producer_field
from cluster.workloads.copier_instance import CHECKPOINTS, CopierInstance, Crash


class CopierWorkload(Workload):
    name = "copier"
    transactional = True
    strict_unseen = True
    clients = ("eoslab", "confluent-kafka", "kafka-python", "aiokafka")   # `eoslab run --client`
    OPTIONS = {"copiers": (int, 2), "offsets": (("transaction", "consumer"), "transaction"),
               "crash-interval": (float, 4.0), "crash-point": (("random", "none") + CHECKPOINTS, "random"),
               "input-rate": (float, 100.0), "drain-timeout": (float, 60.0)}

    def __init__(self, bootstrap, history, seed, topic="copier", *args, client: str = "eoslab",
                 kafka_bootstrap: str = "", **kw):
        super().__init__(bootstrap, history, seed, topic, *args, **kw)
        self.client = client                  # eoslab, or a real Kafka client (cluster/workloads/real_copier.py)
        self.kafka_bootstrap = kafka_bootstrap
        self.base = topic
        self.in_topic, self.out_topic = f"{topic}-in", f"{topic}-out"
        self.topic = self.out_topic                  # what the nemesis aims lost ACKs and leader kills at
        self.group = f"{topic}-copier"
        n = self.options["copiers"]
        if n < 1:
            raise ValueError("workload.copiers must be at least 1")
        self._procs = itertools.count(n + 2)         # 0 input, 1..n copiers, n+1 reader
        self._crash: dict[int, str] = {}
        self._crash_lock = threading.Lock()
        self._sessions = {i: itertools.count(1) for i in range(n)}
        self.crashes: list[dict] = []
        self.errors: list[str] = []
        self.stop_copiers = threading.Event()
        self.input_done = threading.Event()
        self.input_thread: threading.Thread | None = None     # the input producer, once started
        self.t0 = time.monotonic()

    # -- names ------------------------------------------------------------------------------------
    def tid(self, slot: int) -> str:
        return f"{self.base}-copier-{slot}"

    def transactional_ids(self) -> list[str]:
        return [self.tid(i) for i in range(self.options["copiers"])]

    def session_name(self, slot: int) -> str:
        return f"c{slot}-{next(self._sessions[slot])}"

    @staticmethod
    def in_key(p: int) -> str:
        return f"in-{p}"

    @staticmethod
    def out_key(p: int) -> str:
        return f"out-{p}"

    def in_keys(self) -> list[str]:
        return [self.in_key(p) for p in range(self.partitions)]

    # -- crashes ------------------------------------------------------------------------------------
    def take_crash(self, slot: int, checkpoint: str) -> bool:
        with self._crash_lock:
            if self._crash.get(slot) == checkpoint:
                del self._crash[slot]
                self.crashes.append({"slot": slot, "at": checkpoint, "time": round(time.monotonic() - self.t0, 3)})
                return True
        return False

    def _crasher(self) -> None:
        rng = random.Random(self.seed * 7919 + 1)
        every = self.options["crash-interval"]
        fixed = self.options["crash-point"]
        if every <= 0 or fixed == "none":
            return
        while not self.stop.wait(rng.uniform(0.5 * every, 1.5 * every)):
            slot = rng.randrange(self.options["copiers"])
            point = rng.choice(CHECKPOINTS) if fixed == "random" else fixed
            with self._crash_lock:
                self._crash.setdefault(slot, point)

    # -- setup and threads --------------------------------------------------------------------
    def setup(self) -> None:
        md = ClusterMetadata(self.bootstrap)
        try:
            for t in (self.in_topic, self.out_topic):
                create_topic(md, t, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.input_thread = self.spawn(self._input, name="copier-input")
        for i in range(self.options["copiers"]):
            self.spawn(self._slot, i, name=f"copier-{i}")
        self.spawn(self._reader, self.options["copiers"] + 1, name="copier-reader")
        self.spawn(self._crasher, name="copier-crasher")

    def halt(self, timeout: float = 60.0) -> None:
        """Stop the input and the reader now; the copiers go on until final_reads has drained the input."""
        self.input_done.set()
        self.stop.set()

    def _input(self) -> None:
        rng = random.Random(self.seed * 1000)
        props = self.client_props()
        if self.client != "eoslab":
            from cluster.workloads.real_clients import make_producer
            producer = make_producer(self.client, self.kafka_bootstrap, props)
        else:
            producer = KafkaProducer(self.bootstrap, ProducerConfig.from_props(props))
        session, process, gap = "in-1", 0, 1.0 / max(self.options["input-rate"], 0.1)
        try:
            while not self.input_done.is_set():
                p, v = rng.randrange(self.partitions), self.next_value()
                self.history.invoke(process, "send", [["send", self.in_key(p), v]])
                try:
                    m = producer.send(self.in_topic, str(v).encode(), partition=p).result(timeout=self.op_timeout)
                except Exception as e:  # noqa: BLE001
                    t, err = outcome(e)
                    self.history.complete(process, t, "send", [["send", self.in_key(p), v]], error=err)
                    if t == "info":
                        process = self.new_process()
                    continue
                off = m.offset if m.offset >= 0 else None
                self.history.complete(process, "ok", "send", [["send", self.in_key(p), [off, v]]],
                                      producer=producer_field(m.producer_id, m.producer_epoch, session, None),
                                      seq=[m.base_sequence])
                self.input_done.wait(gap)
        finally:
            producer.close(5)

    def _slot(self, slot: int) -> None:
        process = slot + 1
        while not self.stop_copiers.is_set():
            if self.client != "eoslab":
                from cluster.workloads.real_copier import RealCopierInstance
                inst = RealCopierInstance(self, slot, process)
            else:
                inst = CopierInstance(self, slot, process)
            if not inst.open():
                process = self.new_process()
                time.sleep(0.5)
                continue
            try:
                while not self.stop_copiers.is_set():
                    if inst.step() == "info":
                        pass                         # the instance retired its process itself
            except Crash:
                inst.abandon()
                process = self.new_process()
                time.sleep(0.2)
                continue
            except Exception as e:  # noqa: BLE001 - an unforeseen error ends this instance like a crash
                self.errors.append(f"copier {slot}: {type(e).__name__}: {e}")
                inst.abandon()
                process = self.new_process()
                time.sleep(0.5)
                continue
            inst.close()
            return

    def _reader(self, process: int) -> None:
        if self.client != "eoslab":
            from cluster.workloads.real_clients import make_consumer
            c = make_consumer(self.client, self.kafka_bootstrap, "read_committed")
        else:
            c = KafkaConsumer(self.bootstrap, isolation_level="read_committed")
        c.assign([(self.out_topic, p) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                self.history.invoke(process, "poll", [["poll"]], isolation="read_committed")
                try:
                    recs = c.poll(timeout_ms=300)
                except Exception as e:  # noqa: BLE001
                    self.history.complete(process, "fail", "poll", [["poll"]], error=outcome(e)[1],
                                          isolation="read_committed")
                    continue
                polled = by_key(recs, lambda r: self.out_key(r.partition))
                self.history.complete(process, "ok", "poll", [["poll", polled]], isolation="read_committed")
        finally:
            c.close()

    # -- the end -----------------------------------------------------------------------------------
    def _drained(self) -> bool:
        tps = [(self.in_topic, p) for p in range(self.partitions)]
        c = KafkaConsumer(self.bootstrap, group_id=self.group)
        try:
            ends = c.end_offsets(tps)
            committed = c.group.committed(tps, timeout=5)
            return all(max(committed.get(tp, -1), 0) >= ends[tp] for tp in tps)   # -1: nothing committed
        except Exception:  # noqa: BLE001 - not yet
            return False
        finally:
            c.metadata.close()

    def final_reads(self, timeout: float = 60.0) -> int:
        # the input's last send may still be in flight after halt(): the drain is judged only once it has
        # ended (acknowledged or not), else a record acknowledged after the check would never be copied
        # and read as unseen (a slow chaos run under kill-zookeeper: acknowledged 10 s after its send)
        if self.input_thread is not None:
            self.input_thread.join(self.op_timeout + 10)
        deadline = time.monotonic() + self.options["drain-timeout"]
        drained = False
        while time.monotonic() < deadline and not drained:
            drained = self._drained()
            if not drained:
                time.sleep(0.5)
        self.stop_copiers.set()
        for t in self.threads:
            t.join(max(1.0, deadline - time.monotonic() + 30))
        self.drained = drained
        if not drained:
            raise RuntimeError(f"the copiers did not drain the input within {self.options['drain-timeout']} s")
        keys = {(self.out_topic, p): self.out_key(p) for p in range(self.partitions)}
        n, self.unstable = final_read(self.bootstrap, self.history, keys, "read_committed", timeout)
        return n

    def notes(self) -> dict:
        out = super().notes()
        out["copier_crashes"] = self.crashes
        if self.errors:
            out["copier_errors"] = self.errors[:20]
        return out
