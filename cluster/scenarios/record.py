"""Recording a scenario's client ops in the checker's history contract (checker.kafka).

Guarantees: every op is an `invoke` written before the client acts and
exactly one completion written after it: `ok` with offsets, `fail` only when
every error is definite in eoslab.common.errors (the op did not happen), `info`
otherwise (a timeout, a killed or paused client: it may have happened). Keys
are partition numbers; values are ints unique per scenario, written as
fixed-width ASCII so a batch holds an exact number of records. Sends and
transactions carry `producer` ({pid, epoch, session, transactional_id}) and
`seq` (the sequence number of each record), which the checker's
producer-order, pid-reuse and zombie-write analyses need; polls carry
`isolation`. Producers may be in-process KafkaProducers or worker processes
(cluster.scenarios.worker) offering the same calls.
"""
from __future__ import annotations

import time

from eoslab.common.errors import KafkaError
from clients.producer.record_accumulator import RECORD_OVERHEAD

VALUE_WIDTH = 6


def encode(v: int) -> bytes:
    return b"%06d" % v


def batch_bytes(records: int) -> int:
    """batch.size that makes exactly `records` of our values fill one batch."""
    return records * (RECORD_OVERHEAD + VALUE_WIDTH)


def _definite(e: BaseException) -> bool:
    """Surely not applied: a definite Kafka error for a request that was answered (not `maybe_applied`)."""
    return isinstance(e, KafkaError) and e.definite and not getattr(e, "maybe_applied", False)


def _error_name(e: BaseException) -> str:
    return e.name if isinstance(e, KafkaError) else type(e).__name__


def producer_info(producer, session: str, pid: int | None = None, epoch: int | None = None) -> dict:
    tid = getattr(producer.config, "transactional_id", "") or None
    return {"pid": producer.producer_id if pid is None else pid,
            "epoch": producer.producer_epoch if epoch is None else epoch,
            "session": session, "transactional_id": tid}


class _Writes:
    """Futures of one op's sends, and how the op completes from them."""

    def __init__(self, history, process, f: str, producer, session: str, writes: list[tuple[int, int]]):
        self.history, self.process, self.f = history, process, f
        self.producer, self.session = producer, session
        self.writes = list(writes)
        self.futures: list = []
        self.done = False
        self.invoke = history.invoke(process, f, [["send", k, v] for k, v in self.writes])

    def _send_all(self, topic: str) -> BaseException | None:
        try:
            for k, v in self.writes[len(self.futures):]:
                self.futures.append(self.producer.send(topic, encode(v), partition=k))
        except Exception as e:  # noqa: BLE001 - a send refused at once (fenced, closed, ...)
            return e
        return None

    def _results(self, timeout: float) -> tuple[list, list[BaseException]]:
        metas, errors = [], []
        deadline = time.monotonic() + timeout
        for fut in self.futures:
            try:
                metas.append(fut.result(timeout=max(0.0, deadline - time.monotonic())))
            except Exception as e:  # noqa: BLE001 - KafkaError, TimeoutError, a dead worker
                metas.append(None)
                errors.append(e)
        return metas, errors

    def _ok(self, metas: list, **extra) -> dict:
        value = [["send", k, [m.offset if m.offset >= 0 else None, v]] for (k, v), m in zip(self.writes, metas)]
        first = metas[0] if metas else None
        pr = producer_info(self.producer, self.session, first.producer_id if first else None,
                           first.producer_epoch if first else None)
        self.done = True
        return self.history.complete(self.process, "ok", self.f, value, producer=pr,
                                     seq=[m.base_sequence for m in metas], **extra)

    def _failed(self, errors: list[BaseException], partial: bool = False, **extra) -> dict:
        """Not ok: `fail` only when every error is definite and nothing of the op went through."""
        t = "fail" if errors and not partial and all(_definite(e) for e in errors) else "info"
        if errors:
            extra["error"] = _error_name(errors[0])
        return self._not_ok(t, **extra)

    def _sent_with(self) -> dict:
        """The producer as the records went out: the pid and epoch of an acknowledged send, if any."""
        for fut in self.futures:
            try:
                m = fut.result(timeout=0)
            except Exception:  # noqa: BLE001 - not acknowledged (or the client is gone)
                continue
            return producer_info(self.producer, self.session, m.producer_id, m.producer_epoch)
        return producer_info(self.producer, self.session)

    def _not_ok(self, t: str, **extra) -> dict:
        self.done = True
        return self.history.complete(self.process, t, self.f, [["send", k, v] for k, v in self.writes],
                                     producer=self._sent_with(), **extra)


class SendOp(_Writes):
    """One `send` op: records sent now to one topic, completed from their acknowledgements."""

    def __init__(self, history, process, producer, session: str, topic: str, writes: list[tuple[int, int]]):
        super().__init__(history, process, "send", producer, session, writes)
        self.error = self._send_all(topic)

    def complete(self, timeout: float = 60.0) -> dict:
        if self.error is not None:
            return self._failed([self.error])
        metas, errors = self._results(timeout)
        if errors:       # some batches acknowledged, others not: the op happened in part (info)
            return self._failed(errors, partial=any(m is not None for m in metas))
        return self._ok(metas)

    def abandon(self, why: str) -> dict:
        """The client died before it learned the outcome: info."""
        return self._not_ok("info", error=why)


class Txn(_Writes):
    """One `txn` op: begin, the sends, then commit (ok) or abort (fail); errors decide fail/info."""

    def __init__(self, history, process, producer, session: str, topic: str, writes: list[tuple[int, int]]):
        super().__init__(history, process, "txn", producer, session, writes)
        self.topic = topic

    def begin_and_send(self) -> bool:
        """begin_transaction and every send; False (and the op completed) when that failed at once."""
        try:
            self.producer.begin_transaction()
        except Exception as e:  # noqa: BLE001
            self._failed([e])
            return False
        err = self._send_all(self.topic)
        if err is not None:
            self._abort_after(err)
            return False
        return True

    def wait_sent(self, timeout: float = 30.0) -> None:
        self._results(timeout)

    def _abort_after(self, err: BaseException) -> None:
        try:
            self.producer.abort_transaction()
        except Exception:  # noqa: BLE001 - fenced producers cannot abort; the error below decides
            pass
        self._failed([err])

    def commit(self, timeout: float = 60.0) -> dict:
        try:
            self.producer.commit_transaction()
        except Exception as e:  # noqa: BLE001
            return self._failed([e])
        metas, errors = self._results(timeout)
        return self._failed(errors) if errors else self._ok(metas)

    def abort(self) -> dict:
        """The application aborts: the op failed (did not happen), unless the abort's error says otherwise."""
        try:
            self.producer.abort_transaction()
        except Exception as e:  # noqa: BLE001
            return self._failed([e])
        return self._not_ok("fail", aborted=True)


def init_producer(history, process, producer, session: str) -> dict:
    """init_transactions as an op: ok carries the (pid, epoch) it got (live from here on)."""
    history.invoke(process, "init-producer", None)
    try:
        producer.init_transactions()
    except Exception as e:  # noqa: BLE001
        return history.complete(process, "fail" if _definite(e) else "info", "init-producer", None,
                                error=_error_name(e))
    return history.complete(process, "ok", "init-producer", None, producer=producer_info(producer, session))


def poll_all(history, process, bootstrap: str, topic: str, partitions: int,
             isolation: str = "read_uncommitted", timeout: float = 30.0) -> int:
    """Read every partition from the beginning to its end offset, recorded as polls."""
    from clients.consumer import KafkaConsumer
    c = KafkaConsumer(bootstrap, isolation_level=isolation)
    tps = [(topic, p) for p in range(partitions)]
    n = 0
    try:
        c.assign(tps)
        c.seek_to_beginning(tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while True:
            history.invoke(process, "poll", [["poll"]], isolation=isolation)
            try:
                records = c.poll(timeout_ms=300)
            except Exception as e:  # noqa: BLE001 - the poll read nothing
                history.complete(process, "fail", "poll", [["poll"]], isolation=isolation, error=_error_name(e))
                raise
            by_key: dict = {}
            for r in records:
                by_key.setdefault(r.partition, []).append([r.offset, int(r.value)])
            history.complete(process, "ok", "poll", [["poll", by_key]], isolation=isolation, final=True)
            n += len(records)
            if all(c.positions[tp] >= ends[tp] for tp in tps):
                return n
            if time.monotonic() > deadline:
                raise TimeoutError(f"final reads of {topic} did not reach the end offsets in {timeout:.0f} s")
    finally:
        c.close()
