"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, timeouts, expiry.

Guarantees (Kafka's TransactionCoordinator, KIP-98/360/890):
- a new transactional.id gets a producer id from the controller's blocks;
  every InitProducerId for a known id bumps the epoch, and one arriving while
  a transaction is open first fences it (epoch + 1, ABORT markers at that
  epoch on every partition of the transaction) and answers
  CONCURRENT_TRANSACTIONS until the abort is complete; an init carrying
  (producer id, epoch) must match the current or the previous pair (KIP-360)
  or gets PRODUCER_FENCED; an exhausted epoch gives a new producer id;
- requests with another producer id get INVALID_PRODUCER_ID_MAPPING, with
  another epoch PRODUCER_FENCED; during a pending transition or while
  markers are written CONCURRENT_TRANSACTIONS; EndTxn in a state that does
  not allow it INVALID_TXN_STATE; a retried EndTxn that already took effect
  gets NONE;
- EndTxn is answered once PrepareCommit/PrepareAbort is durable; markers go
  out afterwards and CompleteCommit/CompleteAbort is written once every
  partition holds its marker; a coordinator that takes over a partition
  finishes the Prepare* transactions it replays; an AddPartitionsToTxn that
  arrives while the previous transaction completes is held up to
  `concurrent_hold_ms` for it (the same checks then run on the completed
  state) and only then answered CONCURRENT_TRANSACTIONS, so the producer's
  next transaction starts as soon as the last one is complete instead of
  at its next retry;
- a transaction open longer than its timeout is fenced and aborted; an id
  idle (Empty/Complete*) for transactional.id.expiration.ms is written as a
  tombstone and forgotten (its next init gets a new producer id);
- switch `epoch_bump_per_txn` (KIP-890 part 2): EndTxn bumps the epoch, the
  markers carry the new one and the response returns it, so a late request
  of the finished transaction is fenced;
- time is the injected `Time` (`self.time`), never the `time` module: the
  transaction timestamps and the timeout and expiry rules read its WALL clock
  (`milliseconds()`, as Kafka's coordinator does, so a wall-clock step moves
  them), the hold and the check interval its monotonic clock;
  `run_periodic_checks()` is one pass of both periodic rules at the current
  clock; the background loop runs the timeout rule every `abort_interval_ms`
  (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms,
  10 s) and the expiry rule every `expiration_check_interval_ms`
  (transaction.remove.expired.transaction.cleanup.interval.ms, 1 h);
  `check_interval_ms`, when given, sets both.
"""
from __future__ import annotations

import logging
import threading

from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time
from eoslab.v1 import broker_pb2, txn_pb2
from services.common import internal_topics as it
from eoslab.common.record_batch import MAX_PRODUCER_EPOCH
from services.txn_coordinator.transaction_metadata import (IllegalTransition, ProducerFenced,
                                                           TransactionMetadata, TransactionState)
from services.txn_coordinator.transaction_timeouts import TransactionTimeouts

S = TransactionState
log = logging.getLogger(__name__)
ABORT_INTERVAL_MS = 10000                  # transaction.abort.timed.out.transaction.cleanup.interval.ms
EXPIRATION_CHECK_INTERVAL_MS = 3600000     # transaction.remove.expired.transaction.cleanup.interval.ms


class TransactionCoordinator(TransactionTimeouts):
    def __init__(self, state_manager, marker_manager, pid_manager, max_timeout_ms: int = 900000,
                 expiration_ms: int = 604800000, check_interval_ms: int | None = None,
                 epoch_bump_per_txn: bool = False, offsets_partitions=None, init_with_producer_id: bool = True,
                 concurrent_hold_ms: int = 100, time: Time = SYSTEM, abort_interval_ms: int = ABORT_INTERVAL_MS,
                 expiration_check_interval_ms: int = EXPIRATION_CHECK_INTERVAL_MS):
        self.time = time
        self.tsm = state_manager
        self.markers = marker_manager
        self.pids = pid_manager
        self.max_timeout_ms = max_timeout_ms
        self.expiration_ms = expiration_ms
        if check_interval_ms is not None:
            abort_interval_ms = expiration_check_interval_ms = check_interval_ms
        self.abort_interval = abort_interval_ms / 1000.0
        self.expiration_check_interval = expiration_check_interval_ms / 1000.0
        self.epoch_bump_per_txn = epoch_bump_per_txn
        self.init_with_producer_id = init_with_producer_id     # KIP-360 (2.5); 0.11's requests carry no pair
        self.offsets_partitions = offsets_partitions   # () -> number of __consumer_offsets partitions
        self.concurrent_hold = concurrent_hold_ms / 1000.0
        self.tsm.on_loaded = self._on_loaded
        self.after_prepare = None    # (tid, committed) -> None once Prepare* is durable: faults.py's crash hook
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._scheduler, name="txn-timeouts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()

    # -- helpers ----------------------------------------------------------------------------------
    def _write(self, op, md: TransactionMetadata, transit) -> int:
        err = self.tsm.append(op, md.transactional_id, transit)
        with md.lock:
            if err == E.NONE:
                md.complete_transition(transit)
            else:
                md.abort_transition()
        return err

    def _new_pid(self) -> tuple[int, int]:
        return self.pids.generate_producer_id()

    # -- InitProducerId ---------------------------------------------------------------------------
    def init_producer_id(self, req) -> broker_pb2.InitProducerIdResponse:
        def fail(err):
            return broker_pb2.InitProducerIdResponse(error=err, producer_id=-1, producer_epoch=-1)
        tid = req.transactional_id
        if not tid:
            return fail(E.INVALID_REQUEST)
        timeout = req.transaction_timeout_ms
        if not 0 < timeout <= self.max_timeout_ms:
            return fail(E.INVALID_TRANSACTION_TIMEOUT)
        err, op = self.tsm.owner_of(tid)
        if err != E.NONE:
            return fail(err)
        md = op.cache.get(tid)
        if md is None:
            err, pid = self._new_pid()
            if err != E.NONE:
                return fail(err)
            md = op.cache.setdefault(tid, TransactionMetadata(tid, pid, -1, -1, -1, timeout, S.EMPTY))
        expected = (req.producer_id, req.producer_epoch) if self.init_with_producer_id and req.producer_id >= 0 \
            else None
        with md.lock:
            if md.pending_state is not None:
                return fail(E.CONCURRENT_TRANSACTIONS)
            if expected is not None and not self._valid_expected_producer(md, *expected):
                return fail(E.PRODUCER_FENCED)
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD):
                return fail(E.CONCURRENT_TRANSACTIONS)
            if md.state == S.ONGOING:
                md.prepare_fence_producer_epoch()
                fence = True
            else:
                fence = False
                new_pid = None
                if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                    err, new_pid = self._new_pid()
                    if err != E.NONE:
                        return fail(err)
                try:
                    transit = md.prepare_increment_producer_epoch(timeout, new_pid,
                                                                  None if expected is None else expected[1],
                                                                  now_ms=self.time.milliseconds())
                except ProducerFenced as e:
                    log.info("%s", e)
                    return fail(E.PRODUCER_FENCED)
        if fence:
            log.info("%s: InitProducerId during an open transaction: fencing epoch %d and aborting",
                     tid, md.producer_epoch)
            self._end_transaction(op, md, committed=False, fence=True)
            return fail(E.CONCURRENT_TRANSACTIONS)
        err = self._write(op, md, transit)
        if err != E.NONE:
            return fail(err)
        return broker_pb2.InitProducerIdResponse(error=E.NONE, producer_id=md.producer_id,
                                                 producer_epoch=md.producer_epoch)

    @staticmethod
    def _valid_expected_producer(md: TransactionMetadata, pid: int, epoch: int) -> bool:
        """KIP-360: whom an init carrying (pid, epoch) may come from (Kafka's isValidProducerId): a
        metadata just created, the current producer id, or the previous one with an exhausted epoch
        (a retry of the init that rotated the id). The epoch is judged by the bump itself."""
        return md.producer_epoch == -1 or pid == md.producer_id or \
            (pid == md.last_producer_id and epoch >= MAX_PRODUCER_EPOCH - 1)

    # -- partitions ------------------------------------------------------------------------------
    def _check_producer(self, md: TransactionMetadata, pid: int, epoch: int) -> int:
        """Kafka's order: producer id, then epoch, then a pending transition or Prepare* state. An
        epoch fence in progress is pending (its epoch is not yet the current one): the producer
        gets CONCURRENT_TRANSACTIONS and learns it is fenced when it retries after the abort."""
        if md is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        in_flight = md.pending_state is not None or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT,
                                                                  S.PREPARE_EPOCH_FENCE)
        if pid != md.producer_id:
            if pid == md.next_producer_id >= 0 and epoch == 0 and in_flight:
                return E.CONCURRENT_TRANSACTIONS     # KIP-890: the id the EndTxn returned, not yet in place
            return E.INVALID_PRODUCER_ID_MAPPING
        if epoch != md.producer_epoch:
            return E.PRODUCER_FENCED
        if in_flight:
            return E.CONCURRENT_TRANSACTIONS
        return E.NONE

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                       verify_only: bool = False) -> int:
        err, op = self.tsm.owner_of(tid)
        if err != E.NONE:
            return err
        md = op.cache.get(tid)
        if md is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        with md.lock:
            err = self._check_producer(md, pid, epoch)
            if err == E.CONCURRENT_TRANSACTIONS and not verify_only:
                err = self._hold_while_completing(md, pid, epoch)
            if err != E.NONE:
                return err
            if verify_only:
                return E.NONE if md.state == S.ONGOING and partitions <= md.partitions else E.INVALID_TXN_STATE
            if md.state == S.ONGOING and partitions <= md.partitions:
                return E.NONE
            try:
                transit = md.prepare_add_partitions(partitions, now_ms=self.time.milliseconds())
            except IllegalTransition:
                return E.INVALID_TXN_STATE
        return self._write(op, md, transit)

    def _hold_while_completing(self, md: TransactionMetadata, pid: int, epoch: int) -> int:
        """Under md.lock: wait up to `concurrent_hold` (of this coordinator's clock) while the previous
        transaction's markers and Complete* record are written, checking the producer again at every
        change (CONCURRENT_TRANSACTIONS if it is still completing at the deadline). Only a completion
        is waited for, not an epoch fence."""
        err = E.CONCURRENT_TRANSACTIONS

        def settled() -> bool:
            nonlocal err
            err = self._check_producer(md, pid, epoch)
            return err != E.CONCURRENT_TRANSACTIONS or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) \
                or self._stopping.is_set()
        self.time.wait_for(md.changed, settled, self.concurrent_hold)
        return err

    def add_offsets(self, req) -> int:
        n = self.offsets_partitions() if self.offsets_partitions else it.DEFAULT_OFFSETS_PARTITIONS
        if not n:
            return E.COORDINATOR_NOT_AVAILABLE
        tp = (it.CONSUMER_OFFSETS_TOPIC, it.partition_for(req.group_id, n))
        return self.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, {tp})

    # -- EndTxn ---------------------------------------------------------------------------------
    def end_txn(self, req, epoch_bump: bool | None = None) -> txn_pb2.EndTxnResponse:
        """`epoch_bump` overrides `epoch_bump_per_txn` for this request: a Kafka client's EndTxn below
        v5 is a transaction.version 1 client that does not expect the KIP-890 bump."""
        bump = self.epoch_bump_per_txn if epoch_bump is None else epoch_bump
        def answer(err, md=None):
            if md is None or err != E.NONE:
                return txn_pb2.EndTxnResponse(error=err, producer_id=-1, producer_epoch=-1)
            with md.lock:
                pid, epoch = md.next_pid_and_epoch()
            return txn_pb2.EndTxnResponse(error=err, producer_id=pid, producer_epoch=epoch)
        tid = req.transactional_id
        err, op = self.tsm.owner_of(tid)
        if err != E.NONE:
            return answer(err)
        md = op.cache.get(tid)
        if md is None or req.producer_id not in (md.producer_id, md.last_producer_id):
            return answer(E.INVALID_PRODUCER_ID_MAPPING)
        if bump:
            with md.lock:
                err = self._check_end_txn_v2(md, req)
            if err is not None:
                return answer(err, md)
            err = self._end_transaction(op, md, req.committed, fence=False, bump=True)
            return answer(err, md)
        with md.lock:        # transaction.version 1: the epoch stays, so a retry comes at the current one
            done = S.COMPLETE_COMMIT if req.committed else S.COMPLETE_ABORT
            prepared = S.PREPARE_COMMIT if req.committed else S.PREPARE_ABORT
            if req.producer_id != md.producer_id or req.producer_epoch != md.producer_epoch:
                return answer(E.PRODUCER_FENCED)
            if md.pending_state is not None or md.state == S.PREPARE_EPOCH_FENCE:
                return answer(E.CONCURRENT_TRANSACTIONS)      # a fence in progress is a pending transition
            if md.state == S.ONGOING:
                pass
            elif md.state == done:
                return answer(E.NONE, md)       # a retry of an EndTxn that took effect
            elif md.state == prepared:
                return answer(E.CONCURRENT_TRANSACTIONS)
            else:
                return answer(E.INVALID_TXN_STATE)
        err = self._end_transaction(op, md, req.committed, fence=False, bump=False)
        return answer(err, md)

    @staticmethod
    def _check_end_txn_v2(md: TransactionMetadata, req) -> int | None:
        """Kafka's endTransaction for transaction.version 2 (under md.lock): the answer, or None to
        prepare the end. Each end bumps the epoch, so a request at the epoch below the current one is a
        retry of an end that took effect (or, at the exhausted epoch, of one that moved to a new producer
        id); a Prepare* state answers CONCURRENT_TRANSACTIONS to that or the current epoch, whichever
        end was asked, and an abort from Empty or Complete* ends a transaction with no partitions (to
        bump the epoch). (Kafka's TransactionCoordinator.endTransaction and its TV_2 tests.)"""
        retry_on_overflow = req.producer_id == md.last_producer_id and md.producer_epoch == 0 and \
            req.producer_epoch == MAX_PRODUCER_EPOCH - 1
        retry_on_bump = req.producer_id == md.producer_id and md.producer_epoch == req.producer_epoch + 1
        if req.producer_id != md.producer_id and not retry_on_overflow:
            return E.INVALID_PRODUCER_ID_MAPPING
        retry = retry_on_bump or retry_on_overflow
        current = req.producer_epoch == md.producer_epoch
        ending = md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if not (current or (retry and ending)):
            return E.PRODUCER_FENCED
        if md.pending_state is not None or md.state in (S.PREPARE_EPOCH_FENCE, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        done = S.COMPLETE_COMMIT if req.committed else S.COMPLETE_ABORT
        if md.state == S.ONGOING:
            return None
        if md.state == done and retry:
            return E.NONE
        if not req.committed and not retry and md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return None
        return E.INVALID_TXN_STATE

    def _end_transaction(self, op, md: TransactionMetadata, committed: bool, fence: bool,
                         bump: bool | None = None) -> int:
        """Write Prepare*, then send markers and write Complete* in the background."""
        bump = self.epoch_bump_per_txn if bump is None else bump
        with md.lock:
            next_pid = None
            if bump and not fence and md.epoch_exhausted:
                err, next_pid = self._new_pid()       # KIP-890: the client gets it with the EndTxn answer
                if err != E.NONE:
                    md.abort_transition()
                    return err
            try:
                transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                                                     bump_epoch=bump, fence=fence, next_producer_id=next_pid,
                                                     now_ms=self.time.milliseconds())
            except IllegalTransition as e:
                log.info("%s", e)
                md.abort_transition()
                return E.INVALID_TXN_STATE
        err = self._write(op, md, transit)
        if err != E.NONE:
            return err
        if self.after_prepare is not None:      # --enable-fault-injection: may end the process here
            self.after_prepare(md.transactional_id, committed)
        threading.Thread(target=self._complete, args=(op, md), daemon=True,
                         name=f"markers-{md.transactional_id}").start()
        return E.NONE

    def _complete(self, op, md: TransactionMetadata) -> None:
        with md.lock:
            committed = md.state == S.PREPARE_COMMIT
            pid, epoch, parts = md.producer_id, md.producer_epoch, set(md.partitions)
        err = self.markers.send_markers(pid, epoch, op.coordinator_epoch, committed, parts,
                                        lambda: self.tsm.owner_of(md.transactional_id)[1] is op)
        if err != E.NONE:
            log.warning("%s: markers not completed (%s); the next owner finishes", md.transactional_id, E.Name(err))
            return
        while not self._stopping.is_set():
            with md.lock:
                try:
                    transit = md.prepare_complete(now_ms=self.time.milliseconds())
                except IllegalTransition as e:
                    log.warning("%s", e)
                    return
            err = self._write(op, md, transit)
            if err == E.NONE or err == E.NOT_COORDINATOR:
                return
            self.time.wait_event(self._stopping, 0.1)

    def _on_loaded(self, op) -> None:
        for md in list(op.cache.values()):
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("%s: resuming %s after load", md.transactional_id, md.state.value)
                threading.Thread(target=self._complete, args=(op, md), daemon=True).start()

    def transaction_open(self, tid: str) -> bool:
        """Whether this coordinator holds an open transaction (Ongoing, with partitions) of `tid`: one
        read of that id's metadata, not a walk over every id it owns."""
        err, op = self.tsm.owner_of(tid)
        md = op.cache.get(tid) if err == E.NONE else None
        return md is not None and md.state.value == "Ongoing" and bool(md.partitions)

    def describe(self, tids) -> list[txn_pb2.TransactionStateDescription]:
        out = []
        for op in self.tsm.all_owned():
            for tid, md in list(op.cache.items()):
                if tids and tid not in tids:
                    continue
                d = txn_pb2.TransactionStateDescription(
                    transactional_id=tid, state=md.state.value, producer_id=md.producer_id,
                    producer_epoch=md.producer_epoch, transaction_timeout_ms=md.txn_timeout_ms,
                    transaction_start_time_ms=md.txn_start_ms)
                for t, p in sorted(md.partitions):
                    d.partitions.add(topic=t, partition=p)
                out.append(d)
        return out
