"""ConsumerCoordinator (client side of consumer groups): join, sync, heartbeat, leave, offsets.

Guarantees: the member's assignment is the one the group leader computed for
the member's current generation with the range assignor (partitions of each
topic split in contiguous ranges over the members subscribed to it, sorted
by member id); after REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID the member rejoins before it fetches again (a member
dropped by the coordinator rejoins with a new member id); commits carry the
generation and member id, so a member that lost its generation cannot
commit (KIP-447's fence on the consumer side); `committed` asks with
require_stable and waits while a transactional commit is pending.

Time rules, on the `Time` given: a heartbeat goes out when heartbeat.interval
has passed since the last one (`maybe_heartbeat`, called from poll), not
before; `join` and `committed` give up after their timeout of that clock.
The client has no max.poll.interval.ms rule of its own: a member that stops
polling stops heartbeating and the coordinator drops it after
session.timeout.ms.
"""
from __future__ import annotations

from clients.coordinator import OFFSET_COMMIT_TIMEOUT_S, CoordinatorClient
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.producer.transactions import ConsumerGroupMetadata
from eoslab.v1 import broker_pb2, common_pb2

REJOIN = {E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID}
GROUP_RPC_TIMEOUT_S = 5.0          # Heartbeat, LeaveGroup, OffsetFetch: one call to the group coordinator
UNSTABLE_OFFSET_BACKOFF_S = 0.05   # a require_stable fetch that met a pending transactional commit asks again


def range_assign(members: dict[str, list[str]], partitions_for) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RangeAssignor: per topic, contiguous ranges over the sorted subscribed members."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    topics = sorted({t for ts in members.values() for t in ts})
    for t in topics:
        subs = sorted(m for m, ts in members.items() if t in ts)
        n = partitions_for(t) or 0
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            k = per + (1 if i < extra else 0)
            out[m].extend((t, p) for p in range(start, start + k))
            start += k
    return out


class ConsumerCoordinator:
    def __init__(self, metadata, group_id: str, session_timeout_ms: int = 6000,
                 rebalance_timeout_ms: int = 10000, heartbeat_interval_ms: int = 500, time: Time = SYSTEM):
        self.time = time
        self.metadata = metadata
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.coordinator = CoordinatorClient(metadata, broker_pb2.GROUP, group_id, time=time)
        self.member_id = ""
        self.generation = -1
        self.topics: list[str] = []
        self.assignment: list[tuple[str, int]] | None = None
        self.last_heartbeat = 0.0

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id)

    def _call(self, fn, timeout=30.0):
        return self.coordinator.call(lambda a: fn(self.coordinator.broker_stub()), timeout)

    def need_rejoin(self) -> bool:
        return self.assignment is None

    def join(self, timeout: float = 60.0) -> list[tuple[str, int]]:
        deadline = self.time.monotonic() + timeout
        while self.time.monotonic() < deadline:
            r = self._call(lambda s: s.JoinGroup(broker_pb2.JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                protocol_type="consumer", topics=self.topics), timeout=self.rebalance_timeout_ms / 1000 + 5))
            if r.error == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if r.error in REJOIN:
                continue
            if r.error != E.NONE:
                raise KafkaError(r.error, f"JoinGroup {self.group_id}")
            self.member_id, self.generation = r.member_id, r.generation_id
            assignments = {}
            if r.leader == r.member_id:
                for t in {t for m in r.members for t in m.topics}:
                    if self.metadata.partitions_for(t) is None:
                        self.metadata.refresh([t])
                plan = range_assign({m.member_id: list(m.topics) for m in r.members}, self.metadata.partitions_for)
                assignments = {m: broker_pb2.PartitionList(partitions=[
                    common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps]) for m, tps in plan.items()}
            s = self._call(lambda st: st.SyncGroup(broker_pb2.SyncGroupRequest(
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                assignments=assignments), timeout=self.rebalance_timeout_ms / 1000 + 5))
            if s.error in REJOIN:
                if s.error == E.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            if s.error != E.NONE:
                raise KafkaError(s.error, f"SyncGroup {self.group_id}")
            self.assignment = sorted((tp.topic, tp.partition) for tp in s.assignment)
            self.last_heartbeat = self.time.monotonic()
            return self.assignment
        raise KafkaError(E.REBALANCE_IN_PROGRESS, f"could not join group {self.group_id} in time")

    def maybe_heartbeat(self) -> None:
        if self.assignment is None or self.time.monotonic() - self.last_heartbeat < self.heartbeat_interval:
            return
        r = self._call(lambda s: s.Heartbeat(broker_pb2.HeartbeatRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id), timeout=GROUP_RPC_TIMEOUT_S), 2 * GROUP_RPC_TIMEOUT_S)
        self.last_heartbeat = self.time.monotonic()
        if r.error in REJOIN:
            if r.error == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.assignment = None

    def leave(self) -> None:
        if self.member_id:
            try:
                self._call(lambda s: s.LeaveGroup(broker_pb2.LeaveGroupRequest(
                    group_id=self.group_id, member_id=self.member_id), timeout=GROUP_RPC_TIMEOUT_S), GROUP_RPC_TIMEOUT_S)
            except KafkaError:
                pass
        self.member_id, self.generation, self.assignment = "", -1, None

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        r = self._call(lambda s: s.OffsetCommit(broker_pb2.OffsetCommitRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            partitions=[broker_pb2.OffsetCommitPartition(topic=t, partition=p, offset=o)
                        for (t, p), o in sorted(offsets.items())]), timeout=OFFSET_COMMIT_TIMEOUT_S))
        if r.error != E.NONE:
            if r.error in REJOIN:
                self.assignment = None
            raise KafkaError(r.error, f"OffsetCommit {self.group_id}")

    def committed(self, tps: list[tuple[str, int]], timeout: float = 60.0) -> dict[tuple[str, int], int]:
        deadline = self.time.monotonic() + timeout
        while True:
            r = self._call(lambda s: s.OffsetFetch(broker_pb2.OffsetFetchRequest(
                group_id=self.group_id, require_stable=True,
                partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps]), timeout=GROUP_RPC_TIMEOUT_S))
            if r.error == E.NONE:
                return {(p.topic, p.partition): p.offset for p in r.partitions}
            if r.error != E.UNSTABLE_OFFSET_COMMIT or self.time.monotonic() > deadline:
                raise KafkaError(r.error, f"OffsetFetch {self.group_id}")
            self.time.sleep(UNSTABLE_OFFSET_BACKOFF_S)
