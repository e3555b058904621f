"""One copier instance (Kafka's transactional copier): consume, produce, commit offsets, as one op.

Guarantees: each step is one f "txn" op recorded by the instance's process:
invoked as [["poll"]] before the consumer polls, completed as
[["poll", {"in-p": [[offset, v], ...]}], ["send", "out-p", [offset, v]], ...]
(the output value is the input value, in the output partition of the same
number). `ok` means the transaction that wrote those sends and moved the
group's offsets past those reads committed; `fail` that it certainly did not
(aborted, or never asked to commit); `info` that it is unknown. An EndTxn
that ended without a definite answer is settled before the op completes: the
instance re-inits its transactional.id (which finishes the transaction one
way or the other) and reads the output at the sends' own offsets with
read_committed — present means committed, absent past the last stable offset
means aborted; only when that cannot be told in time is the op `info`. The
sends of an `info` op carry no offsets (the values are not unique across
copy attempts, so the checker must not place them). After an aborted or
failed transaction the consumer goes back to the group's committed offsets.

A crash (`Crash` raised at a named checkpoint) abandons the producer and the
consumer without closing them cleanly (no EndTxn, no LeaveGroup), as a killed
process would: the open op completes `fail` when the crash came before
EndTxn(commit) was sent (the replacement's InitProducerId aborts it), `ok`
after the commit returned. With offsets="consumer" (unsafe: at-least-once) the
offsets are committed by the consumer after the transaction instead of inside
it, so a crash at "after-commit" makes the replacement copy records again.
"""
from __future__ import annotations

import time

from clients.consumer import KafkaConsumer
from clients.producer import KafkaProducer, ProducerConfig
from clients.producer import transaction_manager as txm
from cluster.workloads.base import cause, outcome, producer_field

CHECKPOINTS = ("after-poll", "after-send", "before-commit", "after-commit")
REJOIN = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS")


class Crash(Exception):
    pass


class CopierInstance:
    def __init__(self, wl, slot: int, process: int):
        self.wl, self.slot, self.process = wl, slot, process
        self.session = wl.session_name(slot)
        self.history = wl.history
        self.tid = wl.tid(slot)
        self.producer: KafkaProducer | None = None
        self.consumer: KafkaConsumer | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def _producer(self) -> KafkaProducer:
        props = self.wl.client_props(transaction_timeout_ms="10000")
        props["transactional.id"] = self.tid
        return KafkaProducer(self.wl.bootstrap, ProducerConfig.from_props(props))

    def open(self) -> bool:
        """Init the producer (recorded) and subscribe the consumer (recorded); False if init failed."""
        self.producer = self._producer()
        self.history.invoke(self.process, "init-producer", None, transactional_id=self.tid)
        try:
            self.producer.init_transactions(timeout=self.wl.op_timeout)
        except Exception as e:  # noqa: BLE001
            t, err = outcome(e)
            self.history.complete(self.process, t, "init-producer", None, error=err, transactional_id=self.tid)
            self.producer.close(1)
            self.producer = None
            return False
        self.history.complete(self.process, "ok", "init-producer", None, producer=self._pfield())
        self.consumer = KafkaConsumer(self.wl.bootstrap, isolation_level="read_committed", group_id=self.wl.group,
                                      session_timeout_ms=3000, heartbeat_interval_ms=300)
        self.consumer.subscribe([self.wl.in_topic])
        self.history.invoke(self.process, "subscribe", self.wl.in_keys())
        self.history.complete(self.process, "ok", "subscribe", self.wl.in_keys())
        return True

    def abandon(self) -> None:
        """What a SIGKILL leaves behind: no abort, no LeaveGroup."""
        if self.producer is not None:
            self.producer.sender.force_close = True
            self.producer.close(1)
        if self.consumer is not None:
            self.consumer.metadata.close()

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(5)
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # noqa: BLE001 - leaving the group is a courtesy
                pass

    def _pfield(self, m=None, session: str | None = None) -> dict:
        p = self.producer
        pid, epoch = (m.producer_id, m.producer_epoch) if m is not None else (p.producer_id, p.producer_epoch)
        return producer_field(pid, epoch, session or self.session, self.tid)

    # -- one op -------------------------------------------------------------------------------
    def checkpoint(self, name: str) -> None:
        if self.wl.take_crash(self.slot, name):
            raise Crash(name)

    def step(self) -> str:
        """One op; returns its type. Raises Crash after recording the op's completion."""
        wl, p = self.wl, self.process
        self.history.invoke(p, "txn", [["poll"]])
        try:
            recs = self.consumer.poll(timeout_ms=300)
        except Exception as e:  # noqa: BLE001 - a poll that failed read nothing and wrote nothing
            self.history.complete(p, "fail", "txn", [["poll", {}]], error=outcome(e)[1])
            return "fail"
        reads: dict = {}
        for r in recs:
            reads.setdefault(wl.in_key(r.partition), []).append([r.offset, int(r.value)])
        try:
            self.checkpoint("after-poll")
        except Crash:
            self.history.complete(p, "fail", "txn", [["poll", reads]], error="crashed after-poll")
            raise
        if not recs:
            self.history.complete(p, "ok", "txn", [["poll", {}]])
            wl.stop_copiers.wait(0.05)         # a member without partitions returns at once: do not spin
            return "ok"
        return self._copy(recs, reads)

    def _copy(self, recs, reads) -> str:
        wl, p, prod = self.wl, self.process, self.producer
        sends: list = []
        committing = False
        try:
            prod.begin_transaction()
            for r in recs:
                sends.append((r.partition, int(r.value), prod.send(wl.out_topic, r.value, partition=r.partition)))
            self.checkpoint("after-send")
            positions: dict = {}
            for r in recs:
                positions[(r.topic, r.partition)] = max(positions.get((r.topic, r.partition), 0), r.offset + 1)
            if wl.options["offsets"] == "transaction":
                prod.send_offsets_to_transaction(positions, self.consumer.group_metadata())
            self.checkpoint("before-commit")
            committing = True
            prod.commit_transaction()
        except Crash as c:
            self._complete("fail", reads, sends, error=f"crashed {c}")
            raise
        except Exception as e:  # noqa: BLE001 - classified below
            if committing and prod.transaction_manager.commit_sent:     # EndTxn(commit) may have gone out
                return self._after_commit_error(e, reads, sends)
            err = cause(prod, e)
            send_failed = prod.transaction_manager.abortable_error is not None
            if prod.transaction_manager.fatal_error is None:
                try:
                    prod.abort_transaction(timeout=wl.op_timeout)
                except Exception:  # noqa: BLE001
                    pass
            self._complete("fail", reads, sends, error=err)   # EndTxn(commit) never went out
            if err in REJOIN:
                self._rejoin()
            self._recover(send_failed or prod.transaction_manager.state != txm.READY)   # see txn_ops
            return "fail"
        if wl.options["offsets"] == "consumer":
            try:
                self.checkpoint("after-commit")
            except Crash as c:
                self._complete("ok", reads, sends, error=f"crashed {c}")
                raise
            try:
                self.consumer.commit(positions)
            except Exception:  # noqa: BLE001 - at-least-once: the copy stands, the offsets may lag
                pass
            self._complete("ok", reads, sends)
            return "ok"
        self._complete("ok", reads, sends)
        self.checkpoint("after-commit")       # a crash now loses nothing
        return "ok"

    def _after_commit_error(self, e, reads, sends) -> str:
        t, err = outcome(e)
        if t == "fail":
            self._complete("fail", reads, sends, error=err)
            self._recover(True)
            return "fail"
        session = self.session
        settled = self._settle(sends)
        self._complete(settled or "info", reads, sends, session=session, error=err)
        if settled is None:
            self.process = self.wl.new_process()      # retire, as Jepsen does
        self._rewind()
        return settled or "info"

    def _complete(self, t: str, reads: dict, sends: list, session: str | None = None, **extra) -> None:
        value: list = [["poll", reads]]
        seqs: list = [None]
        m0 = None
        for part, v, fut in sends:
            m = None
            if t != "info" and fut.done() and fut.exception(0) is None:
                m = fut.result(0)
            off = m.offset if m is not None and m.offset >= 0 else None
            value.append(["send", self.wl.out_key(part), [off, v] if off is not None or t != "ok" else v])
            seqs.append(m.base_sequence if m is not None else None)
            m0 = m0 or m
        if t == "info":
            self.history.complete(self.process, t, "txn", value, **extra)
            return
        self.history.complete(self.process, t, "txn", value, producer=self._pfield(m0, session), seq=seqs, **extra)

    # -- recovery -----------------------------------------------------------------------------
    def _reinit(self) -> bool:
        """A new producer object for the same transactional.id (a new session); not recorded as an op,
        because the instance's process may have an op open: the txn ops carry the producer."""
        if self.producer is not None:
            self.producer.close(1)
        self.producer = self._producer()
        self.session = self.wl.session_name(self.slot)
        try:
            self.producer.init_transactions(timeout=self.wl.op_timeout)
            return True
        except Exception:  # noqa: BLE001 - the next op will try again
            return False

    def _recover(self, new_producer: bool) -> None:
        if new_producer:
            self._reinit()
        self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets (what the aborted transaction did not move)."""
        tps = list(self.consumer.positions)
        if not tps:
            return
        try:
            committed = self.consumer.committed(tps)
            for tp in tps:
                self.consumer.positions[tp] = committed.get(tp, -1)
        except Exception:  # noqa: BLE001 - rejoining fetches them again
            self._rejoin()

    def _rejoin(self) -> None:
        if self.consumer is not None and self.consumer.group is not None:
            self.consumer.group.assignment = None

    def _settle(self, sends: list, timeout: float = 30.0) -> str | None:
        """After an EndTxn without a definite answer: "ok" if the sends are visible at read_committed,
        "fail" if they are absent below the last stable offset, None if that cannot be told in time."""
        by_part: dict = {}
        for part, _, fut in sends:
            if not fut.done() or fut.exception(0) is not None or fut.result(0).offset < 0:
                return None
            by_part.setdefault(part, set()).add(fut.result(0).offset)
        deadline = time.monotonic() + timeout
        while not self._reinit() and time.monotonic() < deadline:
            time.sleep(0.5)
        seen: dict = {}
        c = KafkaConsumer(self.wl.bootstrap, isolation_level="read_committed")
        try:
            for part, offs in by_part.items():
                tp = (self.wl.out_topic, part)
                while time.monotonic() < deadline:
                    try:
                        if c.end_offsets([tp])[tp] > max(offs):
                            c.assign([tp])
                            c.seek(tp, min(offs))
                            got = set()
                            while c.positions[tp] <= max(offs) and time.monotonic() < deadline:
                                got |= {r.offset for r in c.poll(300)}
                            seen[part] = got & offs
                            break
                    except Exception:  # noqa: BLE001 - retried until the deadline
                        pass
                    time.sleep(0.3)
        finally:
            c.close()
        if len(seen) < len(by_part):
            return None
        if all(seen[pt] == offs for pt, offs in by_part.items()):
            return "ok"
        if all(not seen[pt] for pt in by_part):
            return "fail"
        return None
