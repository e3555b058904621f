"""Sender: the producer's I/O thread. Drains batches, keeps up to max.in.flight requests per
broker connection, retries, and completes or fails every batch exactly once.

Guarantees:
- per partition, a batch with a sequence goes out only when every earlier
  unacknowledged batch of that partition is already in flight on the same
  connection, so a retried batch is resent before anything after it;
- a request without an answer within request.timeout.ms closes its
  connection, as Kafka's NetworkClient does, and every request in flight on
  it is retried with the same sequence numbers;
- an answer meant for an earlier attempt of a batch (before its partition was
  renumbered) is ignored; each user future is resolved once;
- an idempotent batch is retried with the producer id, epoch and sequence it
  was first sent with, even after an epoch bump that other partitions asked
  for, so a batch written without an answer is deduplicated by the broker;
- a transactional batch is never retried under another producer id or epoch
  than it was sent with: its transaction is over, so it fails;
- delivery.timeout.ms fails a batch whether it waits or is in flight (KIP-91);
  an in-flight one stays on its connection, and its late answer still counts
  for the TransactionManager's unresolved-sequence rule: the epoch is bumped
  only when its sequence stays unresolved;
- what an error does to the producer is decided by the TransactionManager's
  state machine (KIP-360 on 2.5+, fatal on 0.11; see transaction_manager);
- every time rule (request.timeout.ms, delivery.timeout.ms, linger.ms,
  retry.backoff.ms, metadata.max.age.ms) and every idle wait reads the `Time`
  given (eoslab.common.time), never the time module.
"""
from __future__ import annotations

import itertools
import logging
import threading

from eoslab.common.errors import E, NEEDS_METADATA, RETRIABLE, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from clients.producer.config import ProducerConfig
from clients.producer.connection import BrokerConnection, Inbox
from clients.producer.record_accumulator import ProducerBatch, RecordAccumulator
from clients.producer.transaction_manager import InvalidStateTransition, TransactionManager
from eoslab.v1 import broker_pb2

log = logging.getLogger(__name__)


class Sender(threading.Thread):
    def __init__(self, config: ProducerConfig, metadata: ClusterMetadata, accumulator: RecordAccumulator,
                 tm: TransactionManager, init_producer_id, add_partitions=None, time: Time = SYSTEM):
        super().__init__(name="producer-sender", daemon=True)
        self.time = time
        self.cfg = config
        self.metadata = metadata
        self.acc = accumulator
        self.tm = tm
        self.init_producer_id = init_producer_id
        self.add_partitions = add_partitions   # transactional: (set of tps) -> None, raises KafkaError
        self.inbox = Inbox()
        self.conns: dict[str, BrokerConnection] = {}
        self.in_flight_batches: set[ProducerBatch] = set()
        self.correlation = itertools.count(1)
        self.running = True
        self.force_close = False
        self.metadata_stale = True
        self.last_metadata = 0.0
        self.last_expiry_check = 0.0
        self.stats = {"requests": 0, "retries": 0, "timeouts": 0, "acked_records": 0,
                      "failed_records": 0, "duplicate_sequence_acks": 0, "epoch_bumps": 0,
                      "connections_closed": 0}

    def wake(self) -> None:
        self.inbox.put(("wake",))

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> None:
        while self.running or self.acc.has_pending() or self.in_flight_batches:
            if self.force_close:
                self._fail_everything(KafkaError(E.NETWORK_EXCEPTION, "producer closed"))
                break
            try:
                wait = self._run_once()
            except Exception:  # noqa: BLE001 - keep the I/O thread alive
                log.exception("sender loop failed")
                wait = 0.1
            self._drain_inbox(wait)
        for c in list(self.conns.values()):
            c.close(graceful_s=0 if self.force_close else 2.0)

    def _drain_inbox(self, wait: float) -> None:
        for ev in self.inbox.take_all(self.time, max(wait, 0.0005)):
            self._handle_event(ev)

    def _handle_event(self, ev) -> None:
        if ev[0] == "response":
            self._handle_response(ev[1], ev[2])
        elif ev[0] == "closed":
            self._connection_lost(ev[1], f"connection closed: {ev[2]}")

    def _run_once(self) -> float:
        now = self.time.monotonic()
        if self.tm.fatal_error is not None:
            self._fail_everything(self.tm.fatal_error)
            return 0.1
        self._check_timeouts(now)
        if now - self.last_expiry_check > 0.1:
            self.last_expiry_check = now
            self._expire_batches(now)
        if self.tm.unresolved:
            self.tm.maybe_resolve_sequences(self._partition_in_flight)
            if self.tm.fatal_error is not None:
                return 0.0
        if self.tm.transactional:
            if not self.tm.has_producer_id:
                return 0.05   # init_transactions() sets it
            if self.tm.pending_partitions:
                self._add_partitions_to_txn()
        elif self.tm.idempotent and (not self.tm.has_producer_id or self.tm.bump_pending):
            if not self._resolve_producer_id():
                return 0.05
        if self.metadata_stale or now - self.last_metadata > self.cfg.metadata_max_age_ms / 1000:
            self._refresh_metadata()
        ready, wait = self.acc.ready(now)
        by_leader: dict[str, list] = {}
        for tp in ready:
            if not self.tm.sendable_partition(tp):
                wait = min(wait, 0.01)
                continue
            ld = self.metadata.leader(*tp)
            if ld is None:
                self.metadata_stale = True
                wait = min(wait, 0.05)
                continue
            by_leader.setdefault(ld[1], []).append(tp)
        for address, tps in by_leader.items():
            self._send_to(address, tps)
        return min(wait, 0.05) if self.in_flight_batches else wait

    def _partition_in_flight(self, tp) -> bool:
        return any(b.tp == tp for b in self.in_flight_batches)

    def _resolve_producer_id(self) -> bool:
        if self.tm.bump_pending and self.tm.has_producer_id:
            if self.in_flight_batches:
                return False  # bump only once nothing of the old epoch is in flight
            if not self.tm.epoch_exhausted:
                renumbered = self.tm.bump_epoch()
                self.stats["epoch_bumps"] += 1
                log.warning("bumped producer epoch to %d; %d batches renumbered",
                            self.tm.producer_epoch, len(renumbered))
                return True
        self.tm.begin_idempotent_init()
        try:
            pid, epoch = self.init_producer_id()
        except KafkaError as e:
            log.info("InitProducerId failed: %s", e)
            return False
        self.tm.complete_idempotent_init(pid, epoch)
        for b in self.acc.all_batches():
            b.base_sequence = None
            b.attempt_token += 1
        return True

    def _add_partitions_to_txn(self) -> None:
        with self.tm.coordinator_lock:
            tps = set(self.tm.pending_partitions)    # an abort that began meanwhile cleared them
            if tps:
                self._add_partitions_locked(tps)

    def _add_partitions_locked(self, tps) -> None:
        try:
            self.add_partitions(tps)
        except KafkaError as e:
            log.info("AddPartitionsToTxn failed: %s", e)
            self.tm.partitions_not_added(tps)
            if self.tm.fatal_error is None:   # TransactionRequests made the fatal ones fatal already
                self._tm_call(self.tm.transition_to_abortable, e)
                for b in self.acc.all_batches():
                    if b.tp in tps:
                        with self.acc.lock:
                            dq = self.acc.batches.get(b.tp)
                            if dq and b in dq:
                                dq.remove(b)
                        self._fail(b, e)
            return
        self.tm.partitions_added(tps)

    def _tm_call(self, fn, *args, **kw) -> None:
        """A TransactionManager step from the I/O thread: an invalid transition is logged, never kills it
        (Kafka's Sender catches it the same way)."""
        try:
            fn(*args, **kw)
        except InvalidStateTransition as e:
            log.warning("ignored: %s", e)

    def _refresh_metadata(self) -> None:
        try:
            self.metadata.refresh()
            self.metadata_stale = False
        except KafkaError as e:
            log.debug("metadata refresh failed: %s", e)
        self.last_metadata = self.time.monotonic()

    # -- sending ------------------------------------------------------------------------------
    def _sendable(self, b: ProducerBatch, now: float) -> bool:
        if b.retry_at > now:
            return False
        if not self.tm.idempotent:
            return True
        if b.base_sequence is None:
            # no new batch while an earlier sequence of the partition is unresolved, or while batches of an
            # older epoch are unacknowledged (Kafka's rules)
            return self.tm.may_start_new_batch(b.tp)
        return all(x in self.in_flight_batches for x in self.tm.unacked_before(b))

    def _connection(self, address: str) -> BrokerConnection:
        c = self.conns.get(address)
        if c is None or c.closed:
            c = BrokerConnection(address, self.metadata.stub(address), self.inbox)
            self.conns[address] = c
        return c

    def _send_to(self, address: str, tps: list) -> None:
        conn = self._connection(address)
        acks = self.cfg.acks
        while len(conn.in_flight) < self.cfg.max_in_flight:
            now = self.time.monotonic()
            req = broker_pb2.ProduceRequest(correlation_id=next(self.correlation), acks=acks,
                                            timeout_ms=self.cfg.request_timeout_ms,
                                            transactional_id=self.tm.transactional_id)
            batches = {}
            for tp in tps:
                b = self.acc.peek(tp)
                if b is None or not self._sendable(b, now) or self.acc.lingering(b, now):
                    continue
                b = self.acc.pop(tp)
                self.tm.assign(b)
                b.attempts += 1
                if b.ever_sent:
                    self.stats["retries"] += 1
                b.ever_sent = True
                req.partitions.add(topic=b.topic, partition=b.partition,
                                   batch=b.to_wire(self.tm.transactional))
                batches[tp] = (b, b.attempt_token)
            if not batches:
                return
            self.stats["requests"] += 1
            if acks == 0:
                conn.send(req)
                for b, _ in batches.values():
                    self._complete(b, -1)
                continue
            conn.in_flight[req.correlation_id] = (now, batches)
            self.in_flight_batches.update(b for b, _ in batches.values())
            conn.send(req)

    # -- answers ---------------------------------------------------------------------------
    def _handle_response(self, conn: BrokerConnection, resp) -> None:
        entry = conn.in_flight.pop(resp.correlation_id, None)
        if entry is None:
            return
        _, batches = entry
        for pr in resp.partitions:
            item = batches.pop((pr.topic, pr.partition), None)
            if item is not None:
                self._partition_result(item[0], item[1], pr.error, pr.base_offset, pr.error_message)
        for b, token in batches.values():  # the broker said nothing about it
            self._partition_result(b, token, E.UNKNOWN_SERVER_ERROR, -1, "no answer for partition")

    def _partition_result(self, b: ProducerBatch, token: int, err: int, base_offset: int, msg: str) -> None:
        self.in_flight_batches.discard(b)
        if token != b.attempt_token:
            return
        if b.done:
            if err in (E.NONE, E.DUPLICATE_SEQUENCE_NUMBER) and b.ever_sent:
                self.tm.handle_completed_batch(b)   # a late answer for an expired batch: its sequence resolves
            return
        tm = self.tm
        if err == E.NONE:
            self._complete(b, base_offset)
        elif err == E.DUPLICATE_SEQUENCE_NUMBER:
            self.stats["duplicate_sequence_acks"] += 1
            self._complete(b, -1)     # written before; the broker no longer knows the offset
        elif err == E.PRODUCER_FENCED:
            self._fatal(b, KafkaError(err, msg))
        elif err in (E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID) and tm.idempotent:
            self._sequence_error(b, err, msg)
        elif err == E.INVALID_PRODUCER_EPOCH:
            if tm.transactional and tm.can_bump_epoch:
                self._fail_in_transaction(b, KafkaError(err, msg))   # KIP-360 / KIP-588: abort, bump, go on
            else:
                self._fatal(b, KafkaError(err, msg))
        elif err in RETRIABLE and b.attempts <= self.cfg.retries:
            if err in NEEDS_METADATA:
                self.metadata_stale = True
            self._retry(b, err)
        else:
            e = KafkaError(err, msg)
            if tm.transactional:
                self._fail_in_transaction(b, e)
            else:
                self._fail(b, e)
                if tm.idempotent and b.base_sequence is not None:
                    tm.request_epoch_bump(b.tp)   # later sequences of this partition now have a gap

    def _sequence_error(self, b: ProducerBatch, err: int, msg: str) -> None:
        """OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID from an idempotent or transactional producer."""
        tm = self.tm
        if err == E.OUT_OF_ORDER_SEQUENCE_NUMBER and tm.unacked_before(b) and not tm.has_unresolved_sequence(b.tp):
            self._retry(b, err)       # an earlier batch is being retried; this one follows it
            return
        if tm.transactional:
            if tm.can_bump_epoch:
                self._fail_in_transaction(b, KafkaError(err, msg))
            else:
                self._fatal(b, KafkaError(err, msg))   # 0.11: the transactional producer cannot go on
        elif tm.bump_pending or self.cfg.on_out_of_order == "bump-epoch":
            tm.request_epoch_bump(b.tp)
            self._retry(b, err)
        else:
            self._fatal(b, KafkaError(err, msg))

    def _fatal(self, b: ProducerBatch, e: KafkaError) -> None:
        self.tm.transition_to_fatal(e)
        self._fail(b, e)

    def _fail_in_transaction(self, b: ProducerBatch, e: KafkaError) -> None:
        """A batch of the transaction failed: the transaction must abort; KIP-360 releases bump the epoch then."""
        self._tm_call(self.tm.transition_to_abortable, e, bump=True)
        self._fail(b, e)

    def _retry(self, b: ProducerBatch, err: int) -> None:
        tm = self.tm
        if tm.transactional and b.base_sequence is not None and \
                (b.producer_id, b.producer_epoch) != (tm.producer_id, tm.producer_epoch):
            # its transaction is over (Kafka's Sender.completeBatch drops it too)
            self._fail(b, KafkaError(err, f"not retried: producer id/epoch {b.producer_id}/{b.producer_epoch}"
                                          f" is now {tm.producer_id}/{tm.producer_epoch}"))
            return
        # an idempotent batch that holds a sequence is retried with it, under the epoch it was sent with
        # (its partition is stale until it completes): it may already be in the log, and only the same
        # (producer id, epoch, sequence) lets the broker deduplicate it
        b.retry_at = self.time.monotonic() + self.cfg.retry_backoff_ms / 1000.0
        self.acc.reenqueue(b)

    def _connection_lost(self, conn: BrokerConnection, why: str) -> None:
        if self.conns.get(conn.address) is conn:
            del self.conns[conn.address]
        conn.close()
        self.stats["connections_closed"] += 1
        self.metadata_stale = True
        pending = sorted(conn.in_flight.items())
        conn.in_flight.clear()
        for _, (_, batches) in pending:
            for b, token in batches.values():
                self._partition_result(b, token, E.NETWORK_EXCEPTION, -1, why)

    def _check_timeouts(self, now: float) -> None:
        limit = self.cfg.request_timeout_ms / 1000.0
        for conn in list(self.conns.values()):
            if any(now - sent > limit for sent, _ in conn.in_flight.values()):
                self.stats["timeouts"] += 1
                log.info("request to %s timed out; closing the connection", conn.address)
                self._connection_lost(conn, "request timed out")

    def _expire_batches(self, now: float) -> None:
        """delivery.timeout.ms: fail every batch that has reached it, waiting (Kafka's expiredBatches) or in
        flight (getExpiredInflightBatches); an in-flight one keeps its place on the connection, and one that was sent
        leaves its partition's sequence unresolved until its answer (or its connection's end) is known."""
        expired = self.acc.expired_batches(now)
        expired += [b for b in list(self.in_flight_batches)
                    if not b.done and b.has_reached_delivery_timeout(self.acc.delivery_timeout, now)]
        for b in expired:
            e = KafkaError(E.REQUEST_TIMED_OUT, f"delivery.timeout.ms expired: {b.record_count} record(s) "
                                                f"for {b.topic}-{b.partition} not acknowledged")
            if self.tm.transactional:
                self._fail_in_transaction(b, e)
            else:
                self._fail(b, e)
            if self.tm.idempotent and b.ever_sent:
                self.tm.mark_sequence_unresolved(b)

    # -- completion --------------------------------------------------------------------------
    def _complete(self, b: ProducerBatch, base_offset: int) -> None:
        b.done = True
        self.tm.handle_completed_batch(b)
        self.acc.release(b)
        self.stats["acked_records"] += b.record_count
        b.result.complete(base_offset, None, b.base_sequence, b.producer_id, b.producer_epoch)

    def _fail(self, b: ProducerBatch, exc: Exception) -> None:
        if b.done:
            return
        b.done = True
        self.tm.acked(b)
        self.acc.release(b)
        self.stats["failed_records"] += b.record_count
        b.result.complete(-1, exc, b.base_sequence, b.producer_id, b.producer_epoch)

    def _fail_everything(self, exc: Exception) -> None:
        for b in list(self.in_flight_batches):
            self._fail(b, exc)
        self.in_flight_batches.clear()
        for c in self.conns.values():
            c.in_flight.clear()
        with self.acc.lock:
            batches = [b for dq in self.acc.batches.values() for b in dq]
            for dq in self.acc.batches.values():
                dq.clear()
        for b in batches:
            self._fail(b, exc)
