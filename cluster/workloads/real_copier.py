"""A copier instance driven by a real Kafka client (confluent-kafka, kafka-python, aiokafka).

Guarantees: `RealCopierInstance` has the lab instance's interface (`open`,
`step`, `abandon`, `close`; cluster/workloads/copier_instance.py) and
records the same ops: "init-producer", "subscribe", and one f "txn" op per
step, invoked as [["poll"]] and completed as [["poll", {"in-p": [[offset,
v], ...]}], ["send", "out-p", [offset, v]], ...], so the copier's checker
rules apply unchanged. The consumer is a member of the workload's group
(subscribe, read_committed, no auto-commit); the offsets move inside the
transaction with the client's send_offsets_to_transaction (TxnOffsetCommit).
A step is `ok` only when commit_transaction returned; `fail` when it
certainly did not commit (it failed before the commit was asked for, or
abort_transaction returned after the commit failed); `info` otherwise, and
the instance's process is retired. send_offsets_to_transaction is bounded
from outside (client_calls.bounded_call: its op timeout plus HANG_GRACE_S);
a call that outlives that bound fails the step (no commit was asked for)
and its producer is left behind for a new one. After `fail` or `info` the consumer goes
back to the group's committed offsets (a new consumer when that fails) and,
unless the abort returned, a new producer for the same transactional.id
finishes the open transaction (InitProducerId). These clients expose no
producer id, epoch or sequence numbers: those fields stay None, so the
lab's settling of an unanswered EndTxn (which reads the sends back at their
offsets) is not done: such a step is `info`. A crash (`Crash` at a
checkpoint) leaves the transaction open with no EndTxn and closes the
consumer, which leaves the group (these clients have no way to vanish
without a LeaveGroup short of killing the process).
"""
from __future__ import annotations

import time

from cluster.workloads.base import outcome, producer_field
from cluster.workloads.client_calls import ClientCallHung, bounded_call
from cluster.workloads.copier_instance import CopierInstance, Crash
from cluster.workloads.real_clients import Record, _Loop
from cluster.workloads.real_txn import make_txn_producer, send_error

SESSION_TIMEOUT_MS, HEARTBEAT_MS, MAX_RECORDS = 6000, 500, 100
HANG_GRACE_S = 20.0      # past the op timeout, a client call that has not returned is taken as hung


# -- group consumers ----------------------------------------------------------------------------------
class ConfluentGroupConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str):
        from confluent_kafka import Consumer
        self.group = group
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                           "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
        self.c.subscribe([topic])

    def poll(self, timeout_ms: int) -> list[Record]:
        out = []
        for m in self.c.consume(MAX_RECORDS, timeout_ms / 1000.0):
            err = m.error()
            if err is None:
                out.append(Record(m.topic(), m.partition(), m.offset(), m.value()))
            elif err.fatal():
                raise RuntimeError(f"librdkafka consumer: {err.str()}")
        return out

    def rewind(self, timeout: float) -> None:
        from confluent_kafka import OFFSET_BEGINNING
        parts = self.c.assignment()
        if parts:
            for tp in self.c.committed(parts, timeout):
                if tp.offset < 0:
                    tp.offset = OFFSET_BEGINNING
                self.c.seek(tp)

    def commit(self, positions: dict, timeout: float) -> None:
        from confluent_kafka import TopicPartition
        self.c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()], asynchronous=False)

    def close(self) -> None:
        self.c.close()


class KafkaPythonGroupConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str):
        from kafka import KafkaConsumer
        self.group = group
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group,
                               enable_auto_commit=False, isolation_level="read_committed",
                               auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
                               heartbeat_interval_ms=HEARTBEAT_MS)

    def poll(self, timeout_ms: int) -> list[Record]:
        batches = self.c.poll(timeout_ms=timeout_ms, max_records=MAX_RECORDS)
        return [Record(tp.topic, tp.partition, m.offset, m.value) for tp, ms in batches.items() for m in ms]

    def rewind(self, timeout: float) -> None:
        for tp in self.c.assignment():
            off = self.c.committed(tp, timeout_ms=int(timeout * 1000))
            if off is None:
                self.c.seek_to_beginning(tp)
            else:
                self.c.seek(tp, off)

    def commit(self, positions: dict, timeout: float) -> None:
        from kafka import OffsetAndMetadata, TopicPartition
        self.c.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in positions.items()})

    def close(self) -> None:
        self.c.close(autocommit=False)


class AioKafkaGroupConsumer:
    def __init__(self, bootstrap: str, group: str, topic: str):
        from aiokafka import AIOKafkaConsumer
        self.group = group
        self.io = _Loop()

        async def start():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group,
                                 enable_auto_commit=False, isolation_level="read_committed",
                                 auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
                                 heartbeat_interval_ms=HEARTBEAT_MS)
            await c.start()
            return c
        try:
            self.c = self.io.run(start(), 30)
        except Exception:
            self.io.close()
            raise

    def poll(self, timeout_ms: int) -> list[Record]:
        batches = self.io.run(self.c.getmany(timeout_ms=timeout_ms, max_records=MAX_RECORDS), 30)
        return [Record(tp.topic, tp.partition, m.offset, m.value) for tp, ms in batches.items() for m in ms]

    def rewind(self, timeout: float) -> None:
        async def rewind():
            for tp in self.c.assignment():
                off = await self.c.committed(tp)
                if off is None:
                    await self.c.seek_to_beginning(tp)
                else:
                    self.c.seek(tp, off)
        self.io.run(rewind(), timeout)

    def commit(self, positions: dict, timeout: float) -> None:
        from aiokafka import TopicPartition
        self.io.run(self.c.commit({TopicPartition(t, p): o for (t, p), o in positions.items()}), timeout)

    def close(self) -> None:
        try:
            self.io.run(self.c.stop(), 10)
        finally:
            self.io.close()


GROUP_CONSUMERS = {"confluent-kafka": ConfluentGroupConsumer, "kafka-python": KafkaPythonGroupConsumer,
                   "aiokafka": AioKafkaGroupConsumer}


def make_group_consumer(client: str, bootstrap: str, group: str, topic: str):
    if client not in GROUP_CONSUMERS:
        raise ValueError(f"unknown client {client!r} for a consumer group (known: {', '.join(GROUP_CONSUMERS)})")
    return GROUP_CONSUMERS[client](bootstrap, group, topic)


# -- the instance -----------------------------------------------------------------------------------
class RealCopierInstance(CopierInstance):
    """The lab instance's step (poll, record the reads, checkpoints) with a real client's copy."""

    def _new_producer(self):
        props = self.wl.client_props(transaction_timeout_ms="10000")
        p = make_txn_producer(self.wl.client, self.wl.kafka_bootstrap, props, self.tid)
        p.init_transactions(self.wl.op_timeout)
        return p

    def _pfield(self) -> dict:
        return producer_field(None, None, self.session, self.tid)

    def open(self) -> bool:
        self.history.invoke(self.process, "init-producer", None, transactional_id=self.tid)
        try:
            self.producer = self._new_producer()
        except Exception as e:  # noqa: BLE001
            t, err = outcome(e)
            self.history.complete(self.process, t, "init-producer", None, error=err, transactional_id=self.tid)
            return False
        self.history.complete(self.process, "ok", "init-producer", None, producer=self._pfield())
        try:
            self.consumer = make_group_consumer(self.wl.client, self.wl.kafka_bootstrap, self.wl.group,
                                                self.wl.in_topic)
        except Exception:  # noqa: BLE001 - the slot starts over with a new instance
            self.abandon()
            self.producer = None
            return False
        self.history.invoke(self.process, "subscribe", self.wl.in_keys())
        self.history.complete(self.process, "ok", "subscribe", self.wl.in_keys())
        return True

    def abandon(self) -> None:
        """What a crash leaves: the transaction open (no EndTxn); the consumer closed."""
        if self.producer is not None:
            try:
                self.producer.abandon()
            except Exception:  # noqa: BLE001 - the replacement's InitProducerId finishes it
                pass
        self._drop_consumer()

    def _drop_consumer(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # noqa: BLE001 - leaving the group is a courtesy
                pass
            self.consumer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(5)
        self._drop_consumer()

    # -- one op -------------------------------------------------------------------------------------
    def step(self) -> str:
        if self.consumer is None or self.producer is None:     # a recovery that has not succeeded yet
            self._recover(new_producer=self.producer is None)
            if self.consumer is None or self.producer is None:
                self.wl.stop_copiers.wait(0.5)
                return "fail"
        return super().step()

    def _copy(self, recs, reads) -> str:
        wl, prod = self.wl, self.producer
        sends: list = []
        positions: dict = {}
        for r in recs:
            positions[(r.topic, r.partition)] = max(positions.get((r.topic, r.partition), 0), r.offset + 1)
        committing = False
        try:
            prod.begin()
            for r in recs:
                sends.append((r.partition, int(r.value), prod.send(wl.out_topic, r.value, partition=r.partition)))
            self.checkpoint("after-send")
            if wl.options["offsets"] == "transaction":
                # bounded from outside: librdkafka's call can outlive its timeout for good (client_calls.py)
                bounded_call(lambda: prod.send_offsets(positions, self.consumer, wl.op_timeout),
                             wl.op_timeout + HANG_GRACE_S, "send_offsets_to_transaction")
            self.checkpoint("before-commit")
            committing = True
            prod.commit(wl.op_timeout)
        except Crash as c:
            self._complete("fail", reads, sends, error=f"crashed {c}")
            raise
        except Exception as e:  # noqa: BLE001 - classified below
            err = f"client-hung: {e}" if isinstance(e, ClientCallHung) else _name(e)
            aborted = False
            try:
                if not isinstance(e, ClientCallHung):     # a hung client is never called again
                    prod.abort(wl.op_timeout)
                    aborted = True
            except Exception:  # noqa: BLE001 - the client cannot abort: a new producer finishes it
                aborted = False
            if committing and not aborted:          # the commit may have taken effect
                self._complete("info", reads, sends, error=err)
                self.process = wl.new_process()
                self._recover(new_producer=True)
                return "info"
            self._complete("fail", reads, sends, error=err)
            self._recover(new_producer=not aborted)
            return "fail"
        if wl.options["offsets"] == "consumer":
            try:
                self.checkpoint("after-commit")
            except Crash as c:
                self._complete("ok", reads, sends, error=f"crashed {c}")
                raise
            try:
                self.consumer.commit(positions, wl.op_timeout)
            except Exception:  # noqa: BLE001 - at-least-once: the copy stands, the offsets may lag
                pass
            self._complete("ok", reads, sends)
            return "ok"
        self._complete("ok", reads, sends)
        self.checkpoint("after-commit")
        return "ok"

    def _complete(self, t: str, reads: dict, sends: list, **extra) -> None:
        value: list = [["poll", reads]]
        for part, v, fut in sends:
            m = fut.result(0) if t != "info" and fut.done() and send_error(fut) is None else None
            off = m.offset if m is not None and m.offset >= 0 else None
            value.append(["send", self.wl.out_key(part), [off, v] if off is not None or t != "ok" else v])
        if t == "info":
            self.history.complete(self.process, t, "txn", value, **extra)
            return
        self.history.complete(self.process, t, "txn", value, producer=self._pfield(),
                              seq=[None] * len(value), **extra)

    # -- recovery -----------------------------------------------------------------------------------
    def _recover(self, new_producer: bool) -> None:
        """Back to the group's committed offsets; a new producer (new session) when the old one cannot
        go on. Not recorded as ops: the txn ops carry the session."""
        if new_producer:
            if self.producer is not None:
                try:
                    self.producer.abandon()
                except Exception:  # noqa: BLE001
                    pass
            self.producer = None
            self.session = self.wl.session_name(self.slot)
            deadline = time.monotonic() + 30
            while self.producer is None and time.monotonic() < deadline and not self.wl.stop_copiers.is_set():
                try:
                    self.producer = self._new_producer()
                except Exception:  # noqa: BLE001 - retried until the deadline; the next step tries again
                    time.sleep(0.5)
        if self.consumer is not None:
            try:
                self.consumer.rewind(self.wl.op_timeout)
                return
            except Exception:  # noqa: BLE001 - a new member fetches the committed offsets when assigned
                self._drop_consumer()
        try:
            self.consumer = make_group_consumer(self.wl.client, self.wl.kafka_bootstrap, self.wl.group,
                                                self.wl.in_topic)
        except Exception:  # noqa: BLE001 - the next step tries again
            self.consumer = None


def _name(e: BaseException) -> str:
    err = e.args[0] if e.args else None
    if hasattr(err, "name") and callable(err.name):
        return err.name()
    return outcome(e)[1]
