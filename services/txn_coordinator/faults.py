"""In-process fault injection for the transaction coordinator: a delayed copy of an EndTxn (KAFKA-17754)
and a coordinator lost between PrepareCommit (PrepareAbort) and its markers.

Guarantees: only faults injected through the FaultInjector RPC exist (the
service must be started with --enable-fault-injection); a replay fault
copies each of the next `count` EndTxn requests for its transactional.id
(any when empty) after the coordinator has handled the original, and hands
the unchanged copy to the coordinator again after a delay drawn in
[min_delay_ms, max_delay_ms], exactly as if the client's first attempt had
been held in the network while its retry went through (with
next_transaction the delay counts from the moment the id's next transaction
is open and, where brokers verify writes (KIP-890 part 1), a broker has
verified a write of it, so the copy lands after that transaction has
written; waited for at most NEXT_TRANSACTION_WAIT_S); the copy goes the
same way as any EndTxn (every producer- and epoch-rule applies to it), its
answer is kept in the fault's state and logged, never sent anywhere.
`ClearFaults` removes every fault and cancels the copies not yet handled
(a copy waiting out its delay is dropped at once). Every delay and wait is
measured on the injected `Time`, so on a MockTime a copy is handed over
when the test moves the clock past its delay, and not before.

A crash fault (`crash_after_prepare`) names one transactional.id (required)
and which Prepare* it waits for: the first time the coordinator has written
that state for that id to __transaction_state and the append is acknowledged
by the partition's ISR (acks=all, `TransactionCoordinator.after_prepare`,
called before the marker thread starts and before EndTxn is answered), the
registry logs it (WARNING, handlers flushed) and ends the process with
`exit_process(CRASH_EXIT_CODE)` — `os._exit`, no cleanup, no answer, no
marker — exactly as a coordinator that crashes there. Other ids and the
other Prepare* pass untouched; a registry built on the coordinator's own
`end_txn` attaches itself as that coordinator's `after_prepare`, so the hook
exists only when the service runs with --enable-fault-injection.
"""
from __future__ import annotations

import itertools
import logging
import os
import random
import sys
import threading
from dataclasses import dataclass, field

from eoslab.common.errors import name as error_name
from eoslab.common.time import SYSTEM, Time
from eoslab.v1 import faults_pb2
from services.common.faults import FaultInjectorService

log = logging.getLogger(__name__)
NEXT_TRANSACTION_WAIT_S = 5.0
UNVERIFIED_WAIT_S = 0.2      # where no broker verifies (before 3.6): how long after the open to wait
POLL_S = 0.002               # how often (of the clock) a copy for the next transaction looks for it
CRASH_EXIT_CODE = 86         # the exit status of a coordinator a crash_after_prepare fault ended


@dataclass
class ReplayEndTxn:
    fault_id: str
    transactional_id: str
    remaining: int
    min_delay_ms: int
    max_delay_ms: int
    next_transaction: bool = False
    applied: int = 0
    answers: list[str] = field(default_factory=list)
    cleared: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def describe(self) -> str:
        who = self.transactional_id or "any transactional.id"
        since = "the next transaction opened" if self.next_transaction else "the original"
        return f"replay EndTxn of {who} {self.min_delay_ms}-{self.max_delay_ms} ms after {since}"


@dataclass
class CrashAfterPrepare:
    fault_id: str
    transactional_id: str
    prepare_abort: bool
    remaining: int = 1
    applied: int = 0

    def state(self) -> str:
        return "PrepareAbort" if self.prepare_abort else "PrepareCommit"

    def describe(self) -> str:
        return f"crash the coordinator once {self.state()} of {self.transactional_id} is written, before its markers"


class CoordinatorFaultRegistry:
    """The coordinator's injected faults; `after_end_txn` is called once per handled EndTxn."""

    def __init__(self, handle_end_txn, txn_open=lambda tid: True, seed: int | None = None,
                 time: Time = SYSTEM, exit_process=os._exit):
        self.time = time
        self._exit = exit_process              # code -> never returns (os._exit); a test passes its own
        self._crashes: list[CrashAfterPrepare] = []
        coordinator = getattr(handle_end_txn, "__self__", None)
        if coordinator is not None and hasattr(coordinator, "after_prepare"):
            coordinator.after_prepare = self.after_prepare
        self._handle = handle_end_txn          # request -> EndTxnResponse: the coordinator's own path
        self._txn_open = txn_open              # tid -> is a transaction of it open (Ongoing) now
        self._lock = threading.Lock()
        self._faults: list[ReplayEndTxn] = []
        self._timers: list[threading.Timer] = []
        self._ids = itertools.count(1)
        self._rng = random.Random(seed)
        self._verified: dict[str, int] = {}    # tid -> how many writes of it brokers have verified

    def note_verified(self, transactional_id: str) -> None:
        """A broker verified a write of this id's open transaction (verify-only AddPartitionsToTxn)."""
        with self._lock:
            self._verified[transactional_id] = self._verified.get(transactional_id, 0) + 1

    def add_replay(self, transactional_id: str, count: int, min_delay_ms: int, max_delay_ms: int,
                   next_transaction: bool = False) -> str:
        with self._lock:
            f = ReplayEndTxn(f"replay-end-txn-{next(self._ids)}", transactional_id, count, min_delay_ms,
                             max_delay_ms, next_transaction)
            self._faults.append(f)
            return f.fault_id

    def add_crash(self, transactional_id: str, prepare_abort: bool = False) -> str:
        with self._lock:
            f = CrashAfterPrepare(f"crash-after-prepare-{next(self._ids)}", transactional_id, prepare_abort)
            self._crashes.append(f)
            return f.fault_id

    def after_prepare(self, transactional_id: str, committed: bool) -> None:
        """The coordinator wrote Prepare{Commit,Abort} of the id (acknowledged); a matching crash fault
        ends the process here, before the markers."""
        if not self._crashes:
            return
        with self._lock:
            hit = next((f for f in self._crashes if f.remaining > 0 and f.transactional_id == transactional_id
                        and f.prepare_abort == (not committed)), None)
            if hit is None:
                return
            hit.remaining, hit.applied = 0, 1
        log.warning("fault %s: %s of %s is written to the transaction log; the coordinator exits now "
                    "(os._exit %d), before any marker", hit.fault_id, hit.state(), transactional_id,
                    CRASH_EXIT_CODE)
        for h in logging.getLogger().handlers:
            try:
                h.flush()
            except Exception:  # noqa: BLE001 - the crash goes ahead whatever the log does
                pass
        sys.stderr.flush()
        self._exit(CRASH_EXIT_CODE)

    def after_end_txn(self, request) -> None:
        if not self._faults:
            return
        with self._lock:
            for f in self._faults:
                if f.remaining > 0 and f.transactional_id in ("", request.transactional_id):
                    f.remaining -= 1
                    copy = type(request)()
                    copy.CopyFrom(request)
                    delay = self._rng.uniform(f.min_delay_ms, f.max_delay_ms) / 1000.0
                    mark = self._verified.get(request.transactional_id, 0)
                    t = threading.Timer(0, self._replay, (f, copy, delay, mark))
                    t.daemon = True
                    self._timers.append(t)
                    t.start()
                    return

    def _replay(self, fault: ReplayEndTxn, request, delay: float, mark: int) -> None:
        if fault.next_transaction:
            tid = request.transactional_id
            deadline = self.time.monotonic() + NEXT_TRANSACTION_WAIT_S
            opened = None                           # when the next transaction was first seen open
            while (now := self.time.monotonic()) < deadline:
                if fault.cleared.is_set():
                    return
                if opened is None and self._txn_open(tid):
                    opened = now
                if opened is not None and (self._verified.get(tid, 0) > mark or now - opened > UNVERIFIED_WAIT_S):
                    break
                self.time.wait_event(fault.cleared, POLL_S)
        if self.time.wait_event(fault.cleared, delay):
            return                                  # cleared while the copy was held
        with self._lock:
            if fault not in self._faults:           # cleared meanwhile
                return
        try:
            answer = error_name(self._handle(request).error)
        except Exception as e:  # noqa: BLE001 - a copy must never take the coordinator down
            answer = f"exception {type(e).__name__}"
        log.info("replayed EndTxn(%s, pid %d, epoch %d, commit=%s): %s", request.transactional_id,
                 request.producer_id, request.producer_epoch, request.committed, answer)
        with self._lock:
            fault.applied += 1
            fault.answers.append(answer)

    def clear(self) -> None:
        with self._lock:
            for f in self._faults:
                f.cleared.set()
            self._faults.clear()
            for t in self._timers:
                t.cancel()
            self._timers.clear()
            self._crashes.clear()

    def states(self) -> faults_pb2.FaultsResponse:
        with self._lock:
            return faults_pb2.FaultsResponse(faults=[
                faults_pb2.FaultState(fault_id=f.fault_id, description=f.describe(), remaining=f.remaining,
                                      applied=f.applied, answers=f.answers) for f in self._faults] + [
                faults_pb2.FaultState(fault_id=f.fault_id, description=f.describe(), remaining=f.remaining,
                                      applied=f.applied) for f in self._crashes])


class CoordinatorFaultInjectorService(FaultInjectorService):
    """The broker's FaultInjector service (ClearFaults, ListFaults) taking the coordinator's fault kinds."""

    def InjectFault(self, request, context):
        import grpc
        kind = request.WhichOneof("fault")
        if kind == "crash_after_prepare":
            c = request.crash_after_prepare
            if not c.transactional_id:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "crash_after_prepare needs a transactional_id")
            return faults_pb2.InjectFaultResponse(fault_id=self.registry.add_crash(c.transactional_id,
                                                                                   c.prepare_abort))
        if kind != "replay_end_txn":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "a transaction coordinator takes replay_end_txn and crash_after_prepare faults only")
        r = request.replay_end_txn
        if r.count <= 0 or r.min_delay_ms < 0 or r.max_delay_ms < r.min_delay_ms or r.max_delay_ms > 600_000:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "replay_end_txn needs count > 0 and 0 <= min_delay_ms <= max_delay_ms <= 600000")
        return faults_pb2.InjectFaultResponse(
            fault_id=self.registry.add_replay(r.transactional_id, r.count, r.min_delay_ms, r.max_delay_ms,
                                              r.next_transaction))
