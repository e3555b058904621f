"""IsrMaintenance: a leader partition's in-sync replica set, kept by the follower fetches it sees.

Guarantees: a follower's fetch moves its position (and so, through the ISR,
the high watermark) only while this replica leads; an ISR from the
controller is taken only with a newer partition epoch (zk version) than the
one held; `isr_change_wanted` proposes, never applies: a follower not caught
up (Replica.is_caught_up) leaves, one outside the ISR joins once its log end
reached the high watermark and this epoch's start and it fetched within
replica.lag.time.max.ms and since the ISR that left it out was taken (a
follower that died caught up is not added back), and nothing is proposed while a change is in flight
or when not the leader. The leader's high watermark only rises, to the least
log end offset in the ISR (not while the ISR is below min.insync.replicas
where the release says so, KIP-966); acks=all waits for it on the partition's
clock. Every rule reads the partition's `Time`. Mixed into Partition, whose
lock guards all of it.
"""
from __future__ import annotations

from eoslab.common.errors import E
from services.broker.replica import NEVER

# what moved, as Partition.on_change(partition, what) is told (DelayedFetch wakes on them)
LOG_MOVED, HW_MOVED, ROLE_MOVED = 1, 2, 3


class IsrMaintenance:
    """Partition's ISR rules (Kafka's Partition.updateFollowerFetchState, maybeShrinkIsr, maybeExpandIsr),
    and the high watermark they move (maybeIncrementLeaderHW, acks=all's wait)."""

    def update_isr(self, isr: list[int], partition_epoch: int) -> None:
        with self.lock:
            if partition_epoch <= self.partition_epoch:
                return
            for r, st in self.followers.items():
                if r in self.isr and r not in isr:
                    st.last_fetch_time = NEVER   # out from now: it rejoins only by a fetch made after this
            self.isr = list(isr)
            self.partition_epoch = partition_epoch
            if self.is_leader:
                self._maybe_increment_hw()
            self.changed.notify_all()

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, log_start_offset: int = -1) -> None:
        with self.lock:
            st = self.followers.get(replica_id)
            if st is None:
                return
            moved = st.log_start_offset != log_start_offset
            st.update_fetch_state(fetch_offset, self.time.monotonic(), self.log.log_end_offset, log_start_offset)
            self._maybe_increment_hw()
            if moved:
                self.changed.notify_all()       # a DeleteRecords may wait for the low watermark

    def isr_change_wanted(self) -> list[int] | None:
        """The ISR this leader should ask the controller for, or None if it is right. Shrink: a follower
        not caught up (Replica.is_caught_up) leaves. Expand, Kafka's rule: a follower outside the ISR
        (never one just found out of sync: an ISR member holds the high watermark down, so it is always at
        it, as Kafka's canAddReplicaToIsr) whose log end reached the high watermark and this epoch's start
        joins; Kafka checks that on each fetch, so here the follower must have fetched within the lag time
        (a dead one that once caught up does not rejoin, nor one the controller just took out of the ISR: its
        last fetch was before that, so it must fetch again)."""
        with self.lock:
            if not self.is_leader or self.isr_change_in_flight:
                return None
            now, lag, leo = self.time.monotonic(), self.config.replica_lag_time_max_ms / 1000.0, self.log.log_end_offset
            new = [r for r in self.isr if r == self.broker_id or
                   (r in self.followers and self.followers[r].is_caught_up(leo, now, lag))]
            for r, st in self.followers.items():
                if r not in self.isr and st.log_end_offset >= max(self.high_watermark, self.leader_epoch_start) \
                        and now - st.last_fetch_time <= lag:
                    new.append(r)
            new = [r for r in self.replicas if r in new]
            return None if sorted(new) == sorted(self.isr) else new

    def wait_for_replication(self, last_offset: int, leader_epoch: int, timeout: float) -> tuple[int, str]:
        """For acks=all: wait until the high watermark passes last_offset, at most `timeout` seconds of
        this partition's clock (every move of the high watermark or of the role notifies `changed`)."""
        def moved() -> bool:
            return self.high_watermark > last_offset or not self.is_leader or self.leader_epoch != leader_epoch
        with self.lock:
            self.time.wait_for(self.changed, moved, timeout)
            if self.high_watermark <= last_offset:
                if not self.is_leader or self.leader_epoch != leader_epoch:
                    return E.NOT_LEADER_OR_FOLLOWER, "leadership moved before the append was replicated"
                return E.REQUEST_TIMED_OUT, "the ISR did not replicate the append in time"
            if len(self.isr) < self.config.min_insync_replicas:
                return E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, (f"ISR {self.isr} shrank below min.insync.replicas "
                                                           f"{self.config.min_insync_replicas} after the append")
            return E.NONE, ""

    def _maybe_increment_hw(self) -> None:
        if self.config.hw_needs_min_isr and len(self.isr) < self.config.min_insync_replicas:
            return      # 3.9+: a replica that left the ISR then still has everything below the HW (KIP-966)
        leo = self.log.log_end_offset
        ends = [leo] + [self.followers[r].log_end_offset for r in self.isr
                        if r != self.broker_id and r in self.followers]
        hw = min(ends)
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.changed.notify_all()
            self._notify(HW_MOVED)

    def read_replica_candidates(self, fetch_offset: int) -> list[tuple[int, int, int]] | None:
        """KIP-392, for Kafka's ReplicaManager.findPreferredReadReplica: on the leader, (broker id, log end
        offset, ms since caught up) of itself and of each in-sync follower whose log holds `fetch_offset`,
        the leader first; None when this replica does not lead."""
        with self.lock:
            if not self.is_leader:
                return None
            now = self.time.monotonic()
            out = [(self.broker_id, self.log.log_end_offset, 0)]
            for broker_id, r in self.followers.items():
                # a follower out of the ISR may lag on and on: the consumer would fall behind with it
                if broker_id in self.isr and r.log_start_offset <= fetch_offset <= r.log_end_offset:
                    out.append((broker_id, r.log_end_offset, int((now - r.last_caught_up) * 1000)))
            return out
