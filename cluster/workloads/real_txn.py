"""The txn workload's transactions through a real Kafka client (confluent-kafka or kafka-python).

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
`flush(t)`, `commit(t)`, `abort(t)` and `close(t)`; init errors carry
Kafka's code as the lab's KafkaError when the broker answered one.
"""
from __future__ import annotations

import concurrent.futures

from clients.errors import KafkaError
from cluster.workloads.real_clients import ConfluentProducer, KafkaPythonProducer, SendResult, _Fatal

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

    def commit(self, timeout: float) -> None:
        self.p.commit_transaction(timeout)

    def abort(self, timeout: float) -> None:
        self.p.abort_transaction(timeout)


class KafkaPythonTxnProducer(KafkaPythonProducer):
    def __init__(self, bootstrap: str, props: dict, transactional_id: str):
        super().__init__(bootstrap, {**props, "transactional.id": transactional_id})
        self.config = _Config(transactional_id)
        self.producer_id = self.producer_epoch = None
        self.transaction_manager = _Fatal()

    def init_transactions(self, timeout: float) -> None:
        try:
            self.p.init_transactions()
        except Exception as e:  # noqa: BLE001 - converted for the errors table
            raise _converted(e) from None

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

    def commit(self, timeout: float) -> None:
        self.p.commit_transaction()

    def abort(self, timeout: float) -> None:
        self.p.abort_transaction()


def make_txn_producer(client: str, bootstrap: str, props: dict, transactional_id: str):
    if client == "confluent-kafka":
        return ConfluentTxnProducer(bootstrap, props, transactional_id)
    if client == "kafka-python":
        return KafkaPythonTxnProducer(bootstrap, props, transactional_id)
    raise ValueError(f"the txn workload drives {', '.join(TXN_CLIENTS)}, not {client}")


def client_transaction(producer, topic: str, mops: list, op_timeout: float, abort: bool = False):
    """One transaction of [["send", partition, value], ...] through a real client's producer."""
    from cluster.workloads.txn_ops import TxnResult
    futures: list = []

    def result(t, healthy, error=None):
        value = []
        for i, (_, k, v) in enumerate(mops):
            f = futures[i] if i < len(futures) else None
            m = f.result(0) if f is not None and f.done() and f.exception(0) is None else None
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
        producer.commit(op_timeout)
        return result("ok", True)
    except Exception as e:  # noqa: BLE001 - classified below
        err = e.args[0] if e.args else None
        name = err.name() if hasattr(err, "name") and callable(err.name) else type(e).__name__
        try:
            producer.abort(op_timeout)
            return result("fail", True, name)
        except Exception:  # noqa: BLE001 - the commit may have taken effect
            return result("info", False, name)
