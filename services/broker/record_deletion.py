"""DeleteRecords on a partition: the log start offset moved up by a client, by the leader, and followed
by its followers (Kafka's Partition.deleteRecordsOnLeader, lowWatermarkIfLeader and the follower's
maybeIncrementLogStartOffset / truncateFullyAndStartAt).

Guarantees: only the leader deletes; a topic whose cleanup.policy lacks delete is POLICY_VIOLATION; an
offset of -1 means the high watermark; an offset above the high watermark, or negative otherwise, is
OFFSET_OUT_OF_RANGE and moves nothing. The log start offset never moves down (except by a truncation
below it) and is checkpointed when it moves; the segments wholly below it go. A follower takes the
leader's log start offset from each fetch answer, up to its own log end, and one whose log ends below
it starts over, empty, at it. The low watermark is the smallest log start offset of the leader and of
each follower on a live broker (-1 until that follower has fetched since this broker became leader);
`await_low_watermark` waits for it on the partition's condition, woken by every follower fetch.
"""
from __future__ import annotations

import logging

from eoslab.common import topic_configs
from eoslab.common.errors import E

log = logging.getLogger(__name__)
HIGH_WATERMARK = -1          # DeleteRecordsRequest.HIGH_WATERMARK


class RecordDeletion:
    """The Partition's log-start-offset rules (mixed into services.broker.partition.Partition)."""

    def delete_records_on_leader(self, offset: int, topic_configs_now: dict[str, str]) -> tuple[int, int, str]:
        """(error, the offset asked for, a message): move the log start offset to `offset`."""
        with self.lock:
            if not self.is_leader:
                return E.NOT_LEADER_OR_FOLLOWER, -1, ""
            policy = topic_configs.TOPIC_CONFIGS["cleanup.policy"].parse(
                topic_configs_now.get("cleanup.policy", "delete"))
            if "delete" not in policy:
                return (E.POLICY_VIOLATION, -1, f"Records of partition {self.topic}-{self.partition} can not be "
                        "deleted due to the configured policy")
            target = self.high_watermark if offset == HIGH_WATERMARK else offset
            if target < 0 or target > self.high_watermark:
                return (E.OFFSET_OUT_OF_RANGE, -1, f"Cannot increment the log start offset to {target} of "
                        f"partition {self.topic}-{self.partition} since it is larger than the high watermark "
                        f"{self.high_watermark}")
            if self.log.maybe_increment_log_start_offset(target):
                self._log_start_offset_moved()
                log.info("%s-%d: records before %d deleted (DeleteRecords)", self.topic, self.partition, target)
            self.changed.notify_all()
            return E.NONE, target, ""

    def _log_start_offset_moved(self) -> None:
        lso = self.log.log_start_offset
        self.unstable_completed = [(f, m) for f, m in self.unstable_completed if m >= lso]
        self.high_watermark = max(self.high_watermark, lso)

    def low_watermark(self, alive: set[int]) -> int:
        """The smallest log start offset of this leader and its followers on live brokers."""
        with self.lock:
            starts = [st.log_start_offset for r, st in self.followers.items() if r in alive]
            return min(starts + [self.log.log_start_offset])

    def await_low_watermark(self, target: int, alive, timeout_s: float) -> int:
        """Wait until the low watermark reaches `target`, at most timeout_s; answers the low watermark
        (Kafka's DelayedDeleteRecords). `alive` is called for the live brokers each time."""
        with self.lock:
            self.changed.wait_for(lambda: not self.is_leader or self.low_watermark(alive()) >= target,
                                  timeout=max(0.0, timeout_s))
            return self.low_watermark(alive())

    def follow_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A fetch answer's log start offset, taken up to this follower's log end."""
        with self.lock:
            if self.log.maybe_increment_log_start_offset(min(leader_log_start_offset, self.log.log_end_offset)):
                self._log_start_offset_moved()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """This follower's log ends below the leader's log start offset: start over, empty, at it."""
        with self.lock:
            log.info("%s-%d: the leader's log starts at %d, past this log's end %d: starting over there",
                     self.topic, self.partition, offset, self.log.log_end_offset)
            self.log.truncate_fully_and_start_at(offset)
            self.epochs.truncate_from_end(offset)
            self.producer_state.load(self.log)
            self.txn_index.truncate_to(offset)
            self.unstable_completed = []
            self.high_watermark = offset
            self.changed.notify_all()


def delete_records(rm, asked: list[tuple[str, int, int]], timeout_ms: int) -> dict[tuple[str, int], tuple]:
    """Kafka's ReplicaManager.deleteRecords on the ReplicaManager `rm`: {(topic, partition): (error,
    low watermark, message)}. Each partition is deleted on its leader here, then the answer waits for
    the low watermarks to reach the offsets asked, at most timeout_ms (REQUEST_TIMED_OUT for those
    that did not; a timeout of 0 answers at once)."""
    from eoslab.common import auth
    out: dict[tuple[str, int], tuple] = {}
    waiting: list[tuple] = []
    for topic, partition, offset in asked:
        tp = (topic, partition)
        if topic in auth.INTERNAL_TOPICS:
            out[tp] = (E.INVALID_TOPIC_EXCEPTION, -1, f"Cannot delete records of internal topic {topic}")
            continue
        p = rm.get_partition(topic, partition)
        if p is None:
            known = rm.metadata.has_partition(topic, partition)
            out[tp] = (E.NOT_LEADER_OR_FOLLOWER if known else E.UNKNOWN_TOPIC_OR_PARTITION, -1, "")
            continue
        err, target, msg = p.delete_records_on_leader(offset, rm.metadata.topic_configs(topic))
        if err != E.NONE:
            out[tp] = (err, -1, msg)
            continue
        waiting.append((tp, p, target))
    deadline = rm.time.monotonic() + max(0, timeout_ms) / 1000.0

    def alive() -> set[int]:
        with rm.metadata.lock:
            return set(rm.metadata.brokers)
    for tp, p, target in waiting:
        low = p.await_low_watermark(target, alive, deadline - rm.time.monotonic())
        out[tp] = (E.NONE, low, "") if low >= target else (E.REQUEST_TIMED_OUT, low, "")
    return out
