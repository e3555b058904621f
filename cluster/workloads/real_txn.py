"""Transactions through a real Kafka client (confluent-kafka, kafka-python, aiokafka): the txn workload's and the copier's.

Guarantees: `client_transaction` decides an op as cluster.workloads.txn_ops
decides it for the lab's client, with one rule that holds for any client:
"ok" only when commit_transaction returned; "fail" only when the transaction
certainly did not commit: it was aborted on purpose, or abort_transaction()
returned after the commit failed (a commit the coordinator accepted can no
longer be aborted: the abort is refused); "info" otherwise (the commit may
have taken effect). Producer ids, epochs and sequence numbers are not
exposed by these clients: those fields are None. `make_txn_producer` gives
a producer with `config.transactional_id`, `producer_id`, `producer_epoch`,
`init_transactions(timeout)`, `begin()`, `send(...) -> Future`,
`flush(t)`, `send_offsets(positions, consumer, t)` (the consumer group's
offsets into the transaction: TxnOffsetCommit with the group's generation
and member id where the client sends them, KIP-447; aiokafka sends the
group id only), `commit(t)`, `abort(t)`, `close(t)` and `abandon()` (what a
killed process leaves: no EndTxn); errors carry Kafka's code as the lab's
KafkaError when the broker answered one. kafka-python's transaction calls,
which take no timeout, are bounded at the op timeout (client_calls.bounded_call:
ClientCallHung, after which the producer is not called again). The txn workload drives
confluent-kafka and kafka-python, the copier all three
(cluster/workloads/real_copier.py).
"""
from __future__ import annotations

import concurrent.futures

from eoslab.common.errors import KafkaError
from cluster.workloads.client_calls import ClientCallHung, bounded_call
from cluster.workloads.real_clients import AioKafkaProducer, ConfluentProducer, KafkaPythonProducer, SendResult, \
    _aiokafka_error, _Fatal

TXN_CLIENTS = ("eoslab", "confluent-kafka", "kafka-python")


class _Config:
    def __init__(self, transactional_id: str):
        self.transactional_id = transactional_id


def _converted(exc: BaseException) -> BaseException:
    err = exc.args[0] if exc.args else None
    code = err.code() if hasattr(err, "code") else getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return KafkaError(code, str(exc))
    return exc


class ConfluentTxnProducer(ConfluentProducer):
    def __init__(self, bootstrap: str, props: dict, transactional_id: str):
        super().__init__(bootstrap, {**props, "transactional.id": transactional_id})
        self.config = _Config(transactional_id)
        self.producer_id = self.producer_epoch = None

    def init_transactions(self, timeout: float) -> None:
        try:
            self.p.init_transactions(timeout)
        except Exception as e:  # noqa: BLE001 - converted for the errors table
            raise _converted(e) from None

    def begin(self) -> None:
        self.p.begin_transaction()

    def flush(self, timeout: float) -> None:
        self.p.flush(timeout)

    def send_offsets(self, positions: dict, consumer, timeout: float) -> None:
        from confluent_kafka import TopicPartition
        try:
            self.p.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in positions.items()],
                                               consumer.c.consumer_group_metadata(), timeout)
        except Exception as e:  # noqa: BLE001 - converted for the errors table
            raise _converted(e) from None

    def commit(self, timeout: float) -> None:
        self.p.commit_transaction(timeout)

    def abort(self, timeout: float) -> None:
        self.p.abort_transaction(timeout)

    def abandon(self) -> None:
        self._stop.set()
        self.p.purge()          # nothing more is sent; no EndTxn goes out


class KafkaPythonTxnProducer(KafkaPythonProducer):
    def __init__(self, bootstrap: str, props: dict, transactional_id: str):
        super().__init__(bootstrap, {**props, "transactional.id": transactional_id})
        self.config = _Config(transactional_id)
        self.producer_id = self.producer_epoch = None
        self.transaction_manager = _Fatal()

    def _bounded(self, fn, timeout: float, what: str):
        """kafka-python's transaction calls take no timeout and wait for good while no coordinator
        answers (a killed broker that led the id's __transaction_state partition): bounded here."""
        try:
            return bounded_call(fn, timeout, f"kafka-python {what}")
        except ClientCallHung:
            raise
        except Exception as e:  # noqa: BLE001 - converted for the errors table
            raise _converted(e) from None

    def init_transactions(self, timeout: float) -> None:
        self._bounded(self.p.init_transactions, timeout, "init_transactions")

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, value: bytes, partition: int) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        try:
            kp = self.p.send(topic, value, partition=partition)
        except Exception as e:  # noqa: BLE001 - the send did not start
            fut.set_exception(e)
            return fut
        kp.add_callback(lambda m: fut.set_result(SendResult(m.offset)))
        kp.add_errback(lambda e: fut.set_exception(_converted(e)))
        return fut

    def flush(self, timeout: float) -> None:
        self.p.flush(timeout)

    def send_offsets(self, positions: dict, consumer, timeout: float) -> None:
        from kafka import OffsetAndMetadata, TopicPartition
        offsets = {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in positions.items()}
        self._bounded(lambda: self.p.send_offsets_to_transaction(offsets, consumer.c.group_metadata()), timeout,
                      "send_offsets_to_transaction")

    def commit(self, timeout: float) -> None:
        self._bounded(self.p.commit_transaction, timeout, "commit_transaction")

    def abort(self, timeout: float) -> None:
        self._bounded(self.p.abort_transaction, timeout, "abort_transaction")

    def abandon(self) -> None:
        try:
            self.p.close(0)     # no abort: the open transaction is left to the coordinator
        except Exception:  # noqa: BLE001 - records left unsent
            pass


class AioKafkaTxnProducer(AioKafkaProducer):
    """aiokafka's transactional producer on its own event loop; its calls have no timeouts of their own,
    so each is bounded here (a call that runs out is left running on the loop and reported as a timeout)."""

    def __init__(self, bootstrap: str, props: dict, transactional_id: str):
        super().__init__(bootstrap, {**props, "transactional.id": transactional_id})   # start(): InitProducerId
        self.config = _Config(transactional_id)
        self.producer_id = self.producer_epoch = None

    def _call(self, coro, timeout: float):
        try:
            return self.io.run(coro, timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"aiokafka: no answer within {timeout} s") from None
        except Exception as e:  # noqa: BLE001 - converted for the errors table
            raise _aiokafka_error(e) from None

    def init_transactions(self, timeout: float) -> None:
        pass                    # aiokafka's start() (in the constructor) ran InitProducerId

    def begin(self) -> None:
        async def begin():
            await self.p.begin_transaction()
        self._call(begin(), 10)

    def flush(self, timeout: float) -> None:
        self._call(self.p.flush(), timeout)

    def send_offsets(self, positions: dict, consumer, timeout: float) -> None:
        from aiokafka import TopicPartition
        self._call(self.p.send_offsets_to_transaction({TopicPartition(t, p): o for (t, p), o in positions.items()},
                                                      consumer.group), timeout)

    def commit(self, timeout: float) -> None:
        self._call(self.p.commit_transaction(), timeout)

    def abort(self, timeout: float) -> None:
        self._call(self.p.abort_transaction(), timeout)

    def abandon(self) -> None:
        self.close(1)


def make_txn_producer(client: str, bootstrap: str, props: dict, transactional_id: str):
    if client == "confluent-kafka":
        return ConfluentTxnProducer(bootstrap, props, transactional_id)
    if client == "kafka-python":
        return KafkaPythonTxnProducer(bootstrap, props, transactional_id)
    if client == "aiokafka":
        return AioKafkaTxnProducer(bootstrap, props, transactional_id)
    raise ValueError(f"unknown client {client!r} for transactions")


def send_error(f) -> BaseException | None:
    """A finished send's error, None while it runs or once it delivered: its exception, or, for a future
    the client cancelled (aiokafka cancels the batches it drops), an error saying so. f.exception() of a
    cancelled future raises CancelledError, which ended a worker thread as a lab error."""
    if f is None or not f.done():
        return None
    if f.cancelled():
        return RuntimeError("the client cancelled the record's delivery")
    return f.exception(0)


def client_transaction(producer, topic: str, mops: list, op_timeout: float, abort: bool = False):
    """One transaction of [["send", partition, value], ...] through a real client's producer."""
    from cluster.workloads.txn_ops import TxnResult
    futures: list = []

    def result(t, healthy, error=None):
        value = []
        for i, (_, k, v) in enumerate(mops):
            f = futures[i] if i < len(futures) else None
            m = f.result(0) if f is not None and f.done() and send_error(f) is None else None
            value.append(["send", k, [m.offset, v]] if m is not None else
                         (["send", k, v] if t == "ok" else ["send", k, [None, v]]))
        return TxnResult(t, value, [None] * len(mops), None, None, healthy, {"error": error} if error else {})

    try:
        producer.begin()
    except Exception as e:  # noqa: BLE001 - nothing was sent
        return result("fail", False, type(e).__name__)
    for _, k, v in mops:
        futures.append(producer.send(topic, str(v).encode(), partition=k))
    if abort:
        try:
            producer.flush(op_timeout)              # the records reach the log before the abort
            producer.abort(op_timeout)
            return result("fail", True, "aborted-by-client")
        except Exception:  # noqa: BLE001 - no commit was ever asked for: it stays uncommitted
            return result("fail", False, "aborted-by-client")
    try:
        unsent = next((e for f in futures if (e := send_error(f)) is not None), None)
        if unsent is not None:      # a record that never reached the accumulator: Kafka's clients refuse
            raise unsent            # the commit (an abortable error); aiokafka would commit without it
        producer.commit(op_timeout)
        return result("ok", True)
    except Exception as e:  # noqa: BLE001 - classified below
        err = e.args[0] if e.args else None
        name = err.name() if hasattr(err, "name") and callable(err.name) else type(e).__name__
        if isinstance(e, ClientCallHung):       # a hung client is never called again
            return result("info", False, f"client-hung: {e}")
        try:
            producer.abort(op_timeout)
            return result("fail", True, name)
        except Exception:  # noqa: BLE001 - the commit may have taken effect
            return result("info", False, name)
