"""Real Kafka clients behind the interface the workloads use of the lab's producer and consumer.

Guarantees: `make_producer(client, ...)` / `make_consumer(client, ...)` give
objects with the lab client's methods the queue workload calls (`send(topic,
value, partition=k).result(timeout)` with `.offset`, `close(timeout)`,
`transaction_manager.fatal_error`; `assign`, `poll(timeout_ms)` returning
records with topic, partition, offset and value, `close()`), driving
confluent-kafka (librdkafka), kafka-python or aiokafka (on an event loop of
its own) over the brokers' Kafka listeners. Settings go by Kafka's names, as
given (`--set enable.idempotence=true`); a setting the client does not know
fails before the run starts, with the client's own message (aiokafka has no
delivery.timeout.ms: that one is dropped, the workload's op timeout bounds a
send). A failed send raises the lab's `KafkaError` with Kafka's code when the
broker answered one (so the errors table decides fail or info exactly as for
the lab's client) and any other exception when the client gave up on its own
(timeouts, lost connections: info). These clients do not expose their
producer id, epoch or sequence numbers: those history fields stay empty
(None). Transactions through these clients: cluster/workloads/real_txn.py.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from dataclasses import dataclass

from eoslab.common.errors import KafkaError

log = logging.getLogger(__name__)
CLIENTS = ("eoslab", "confluent-kafka", "kafka-python", "aiokafka")
LAB_ONLY = {"kafka.version"}     # the lab's own producer settings that real clients do not take


@dataclass
class SendResult:
    offset: int
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes


class _Fatal:
    def __init__(self):
        self.fatal_error = None


def versions(client: str) -> dict:
    """The client's version (and librdkafka's) for run.json."""
    if client == "confluent-kafka":
        import confluent_kafka
        return {"confluent-kafka": confluent_kafka.version(), "librdkafka": confluent_kafka.libversion()[0]}
    if client == "kafka-python":
        import kafka
        return {"kafka-python": kafka.__version__}
    if client == "aiokafka":
        import aiokafka
        return {"aiokafka": aiokafka.__version__}
    return {}


def _props(props: dict) -> dict:
    return {k: v for k, v in props.items() if k not in LAB_ONLY}


# -- confluent-kafka ---------------------------------------------------------------------------------
class ConfluentProducer:
    def __init__(self, bootstrap: str, props: dict):
        from confluent_kafka import Producer
        self.p = Producer({**_props(props), "bootstrap.servers": bootstrap})
        self.transaction_manager = _Fatal()
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="librdkafka-poll", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.p.poll(0.05)

    def send(self, topic: str, value: bytes, partition: int) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def delivered(err, msg):
            if err is None:
                fut.set_result(SendResult(msg.offset()))
                return
            if err.fatal():
                self.transaction_manager.fatal_error = err
            code = err.code()
            fut.set_exception(KafkaError(code, err.str()) if code >= 0 else RuntimeError(err.name()))
        try:
            self.p.produce(topic, value, partition=partition, on_delivery=delivered)
        except Exception as e:  # noqa: BLE001 - BufferError, a fatal client: the send did not start
            fut.set_exception(e)
        return fut

    def close(self, timeout: float = 5.0) -> None:
        try:
            self.p.flush(timeout)
        finally:
            self._stop.set()
            self._poller.join(1)


class ConfluentConsumer:
    def __init__(self, bootstrap: str, isolation: str = "read_uncommitted"):
        from confluent_kafka import Consumer
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eoslab-poller", "enable.auto.commit": False,
                           "isolation.level": isolation, "auto.offset.reset": "earliest"})

    def assign(self, tps) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        self.c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])

    def poll(self, timeout_ms: int = 200) -> list[Record]:
        out = []
        for m in self.c.consume(500, timeout_ms / 1000.0):
            if m.error() is None:
                out.append(Record(m.topic(), m.partition(), m.offset(), m.value()))
        return out

    def close(self) -> None:
        self.c.close()


# -- kafka-python ------------------------------------------------------------------------------------
def _kafka_python_config(props: dict) -> dict:
    out = {}
    for k, v in _props(props).items():
        if isinstance(v, str) and v.lower() in ("true", "false"):
            v = v.lower() == "true"
        elif isinstance(v, str) and v.lstrip("-").isdigit():
            v = int(v)
        out[k.replace(".", "_")] = v
    return out


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, props: dict):
        from kafka import KafkaProducer
        self.p = KafkaProducer(bootstrap_servers=bootstrap.split(","), **_kafka_python_config(props))
        self.transaction_manager = _Fatal()

    def send(self, topic: str, value: bytes, partition: int):
        return _KafkaPythonFuture(self.p.send(topic, value, partition=partition))

    def close(self, timeout: float = 5.0) -> None:
        try:
            self.p.close(timeout)
        except Exception as e:  # noqa: BLE001 - kafka-python raises when its final flush times out
            log.info("kafka-python producer closed with records unflushed: %s", e)


class _KafkaPythonFuture:
    def __init__(self, fut):
        self.fut = fut

    def result(self, timeout: float | None = None) -> SendResult:
        from kafka.errors import KafkaError as KPError
        try:
            m = self.fut.get(timeout)
        except KPError as e:
            errno = getattr(e, "errno", None)
            if isinstance(errno, int) and errno > 0:      # the broker's answer: the errors table decides
                raise KafkaError(errno, str(e)) from None
            raise
        return SendResult(m.offset)


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, isolation: str = "read_uncommitted"):
        from kafka import KafkaConsumer
        self.c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                               isolation_level=isolation, auto_offset_reset="earliest")

    def assign(self, tps) -> None:
        from kafka import TopicPartition
        parts = [TopicPartition(t, p) for t, p in tps]
        self.c.assign(parts)
        self.c.seek_to_beginning(*parts)

    def poll(self, timeout_ms: int = 200) -> list[Record]:
        out = []
        for tp, msgs in self.c.poll(timeout_ms=timeout_ms).items():
            out += [Record(tp.topic, tp.partition, m.offset, m.value) for m in msgs]
        return out

    def close(self) -> None:
        self.c.close()


# -- aiokafka ----------------------------------------------------------------------------------------
AIOKAFKA_DROPPED = {"delivery.timeout.ms"}   # aiokafka has none: the workload's op timeout bounds a send


def _aiokafka_config(props: dict) -> dict:
    return _kafka_python_config({k: v for k, v in props.items() if k not in AIOKAFKA_DROPPED})


class _Loop:
    """An asyncio event loop in its own thread, for one aiokafka client."""

    def __init__(self):
        import asyncio
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aiokafka-loop", daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float | None = None):
        import asyncio
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro) -> concurrent.futures.Future:
        import asyncio
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(2)


def _aiokafka_error(e: BaseException) -> BaseException:
    errno = getattr(e, "errno", None)
    return KafkaError(errno, str(e)) if isinstance(errno, int) and errno > 0 else e


ENQUEUE_BOUND_S = 120.0     # far beyond aiokafka's own bound on the metadata wait (request_timeout_ms)


class AioKafkaProducer:
    def __init__(self, bootstrap: str, props: dict):
        from aiokafka import AIOKafkaProducer
        self.io = _Loop()
        self.transaction_manager = _Fatal()

        async def start():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap.split(","), **_aiokafka_config(props))
            await p.start()
            return p
        try:
            self.p = self.io.run(start(), 30)
        except Exception:
            self.io.close()
            raise

    def send(self, topic: str, value: bytes, partition: int) -> concurrent.futures.Future:
        """Returns once the record is in the accumulator, as Java's send() returns after its metadata wait:
        aiokafka's send() first waits for the topic's metadata, and a commit or abort asked for during
        that wait would end the transaction without the record, which then joins the next one. aiokafka
        bounds the wait itself (request_timeout_ms); an enqueue that fails gives a failed future."""
        async def enqueue():
            return await self.p.send(topic, value, partition=partition)

        async def delivered(batch_future):
            try:
                m = await batch_future
            except Exception as e:  # noqa: BLE001 - converted for the errors table
                raise _aiokafka_error(e) from None
            return SendResult(m.offset)
        try:
            batch_future = self.io.run(enqueue(), ENQUEUE_BOUND_S)
        except Exception as e:  # noqa: BLE001 - the record never reached the accumulator
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(_aiokafka_error(e) if not isinstance(e, concurrent.futures.TimeoutError)
                                 else TimeoutError(f"aiokafka: the record was not enqueued in {ENQUEUE_BOUND_S} s"))
            return failed
        return self.io.submit(delivered(batch_future))

    def close(self, timeout: float = 5.0) -> None:
        try:
            self.io.run(self.p.stop(), timeout)
        except Exception:  # noqa: BLE001 - closing after a failure
            pass
        finally:
            self.io.close()


class AioKafkaConsumer:
    def __init__(self, bootstrap: str, isolation: str = "read_uncommitted"):
        from aiokafka import AIOKafkaConsumer
        self.io = _Loop()

        async def start():
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                                 isolation_level=isolation, auto_offset_reset="earliest")
            await c.start()
            return c
        self.c = self.io.run(start(), 30)

    def assign(self, tps) -> None:
        from aiokafka import TopicPartition

        async def assign():
            parts = [TopicPartition(t, p) for t, p in tps]
            self.c.assign(parts)
            await self.c.seek_to_beginning(*parts)
        self.io.run(assign(), 30)

    def poll(self, timeout_ms: int = 200) -> list[Record]:
        batches = self.io.run(self.c.getmany(timeout_ms=timeout_ms), 30)
        return [Record(tp.topic, tp.partition, m.offset, m.value) for tp, msgs in batches.items() for m in msgs]

    def close(self) -> None:
        try:
            self.io.run(self.c.stop(), 10)
        except Exception as e:  # noqa: BLE001 - aiokafka's stop() after a broker kill may be cancelled or time out
            log.info("aiokafka consumer closed with an error: %r", e)
        finally:
            self.io.close()


def make_producer(client: str, bootstrap: str, props: dict):
    if client == "confluent-kafka":
        return ConfluentProducer(bootstrap, props)
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, props)
    if client == "aiokafka":
        return AioKafkaProducer(bootstrap, props)
    raise ValueError(f"unknown client {client!r} (known: {', '.join(CLIENTS)})")


def make_consumer(client: str, bootstrap: str, isolation: str = "read_uncommitted"):
    if client == "confluent-kafka":
        return ConfluentConsumer(bootstrap, isolation)
    if client == "kafka-python":
        return KafkaPythonConsumer(bootstrap, isolation)
    if client == "aiokafka":
        return AioKafkaConsumer(bootstrap, isolation)
    raise ValueError(f"unknown client {client!r} (known: {', '.join(CLIENTS)})")


def check_settings(client: str, props: dict) -> None:
    """Build (and close at once) a producer with these settings, pointed nowhere: the client's own
    check of every setting's name and value, as a ValueError with its message."""
    if client == "eoslab":
        return
    try:
        if client == "confluent-kafka":
            from confluent_kafka import Producer
            Producer({**_props(props), "bootstrap.servers": "127.0.0.1:1"})
        elif client == "kafka-python":
            from kafka.producer.kafka import KafkaProducer
            unknown = set(_kafka_python_config(props)) - set(KafkaProducer.DEFAULT_CONFIG)
            if unknown:
                raise ValueError(f"kafka-python has no producer setting {', '.join(sorted(unknown))}")
        elif client == "aiokafka":
            import inspect

            from aiokafka import AIOKafkaProducer
            unknown = set(_aiokafka_config(props)) - set(inspect.signature(AIOKafkaProducer.__init__).parameters)
            if unknown:
                raise ValueError(f"aiokafka has no producer setting {', '.join(sorted(unknown))}")
        else:
            raise ValueError(f"unknown client {client!r} (known: {', '.join(CLIENTS)})")
    except ImportError:
        raise ValueError(f"the {client} client is not installed (pip install -e '.[clients]')") from None
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - the client's own rejection of a setting
        raise ValueError(f"{client}: {e}") from None
