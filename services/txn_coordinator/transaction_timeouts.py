"""TransactionTimeouts: the coordinator's periodic rules, timed-out transactions and idle ids.

Guarantees (Kafka's TransactionCoordinator.abortTimedOutTransactions and
removeExpiredTransactionalIds): an Ongoing transaction with no transition
pending, begun more than its timeout ago, is fenced (epoch + 1) and aborted;
an Empty/Complete* id with no transition pending, idle for
transactional.id.expiration.ms, is written as a tombstone and forgotten only
once the tombstone is durable (otherwise the transition is undone). Both read
the coordinator's `Time`: the rules its wall clock (`milliseconds()`), the
schedule its monotonic clock, each rule on its own interval; a failing pass
is logged and the checks go on. Mixed into TransactionCoordinator.
"""
from __future__ import annotations

import logging

from eoslab.common.errors import E
from services.txn_coordinator.transaction_metadata import TransactionMetadata, TransactionState

S = TransactionState
log = logging.getLogger(__name__)


class TransactionTimeouts:
    """The timeout and expiry rules, and the loop that runs them (`_scheduler`)."""

    def _scheduler(self) -> None:
        """Each periodic rule on its own interval of the monotonic clock, as Kafka schedules them."""
        tasks = [[self.abort_interval, self.abort_timed_out_transactions],
                 [self.expiration_check_interval, self.expire_transactional_ids]]
        start = self.time.monotonic()
        due = [start + interval for interval, _ in tasks]
        while not self.time.wait_event(self._stopping, max(0.0, min(due) - self.time.monotonic())):
            now = self.time.monotonic()
            for i, (interval, fn) in enumerate(tasks):
                if now >= due[i]:
                    due[i] = now + interval
                    try:
                        fn()
                    except Exception:  # noqa: BLE001 - keep checking
                        log.exception("transaction %s check failed", fn.__name__)

    def run_periodic_checks(self) -> None:
        """One pass of the periodic rules at the current clock: abort what timed out, forget idle ids."""
        try:
            self.abort_timed_out_transactions()
            self.expire_transactional_ids()
        except Exception:  # noqa: BLE001 - keep checking
            log.exception("transaction timeout check failed")

    @staticmethod
    def timed_out(md: TransactionMetadata, now: int) -> bool:
        """Kafka's timedOutTransactions: an Ongoing transaction, no transition pending, begun more
        than its timeout before `now` (wall-clock milliseconds; at exactly its timeout it is not)."""
        return md.state == S.ONGOING and md.pending_state is None and md.txn_start_ms + md.txn_timeout_ms < now

    def should_expire(self, md: TransactionMetadata, now: int) -> bool:
        """Kafka's shouldExpire: Empty/Complete*, no transition pending, last updated at least
        transactional.id.expiration.ms before `now` (wall-clock milliseconds)."""
        return md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and md.pending_state is None \
            and md.txn_last_update_ms <= now - self.expiration_ms

    def abort_timed_out_transactions(self) -> None:
        """Kafka's abortTimedOutTransactions: fence (epoch + 1) and abort every timed-out transaction."""
        now = self.time.milliseconds()
        for op in self.tsm.all_owned():
            for md in list(op.cache.values()):
                with md.lock:
                    if not self.timed_out(md, now):
                        continue
                    md.prepare_fence_producer_epoch()
                log.info("%s: transaction open for more than %d ms: fencing epoch %d and aborting",
                         md.transactional_id, md.txn_timeout_ms, md.producer_epoch)
                self._end_transaction(op, md, committed=False, fence=True)

    def expire_transactional_ids(self) -> None:
        """Kafka's removeExpiredTransactionalIds: a tombstone for every idle id, then it is forgotten."""
        now = self.time.milliseconds()
        for op in self.tsm.all_owned():
            for tid, md in list(op.cache.items()):
                with md.lock:
                    if not self.should_expire(md, now):
                        continue
                    md.prepare_dead()
                err = self.tsm.append(op, tid, None)
                with md.lock:
                    if err == E.NONE:
                        md.state, md.pending_state = S.DEAD, None
                        if op.cache.get(tid) is md:
                            del op.cache[tid]
                        log.info("%s: expired after %d ms idle", tid, self.expiration_ms)
                    else:
                        md.abort_transition()
