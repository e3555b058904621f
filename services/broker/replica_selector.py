"""Which replica a consumer should fetch from (KIP-392), as Kafka's `org.apache.kafka.common.replica`.

Guarantees: `RackAwareReplicaSelector.select` picks, for a client with a
rack, the leader when it is in that rack, else the most caught-up replica
in that rack (highest log end offset, then the one caught up most
recently), else the leader; a client without a rack always gets the
leader. `selector(name)` answers the selector a broker's
replica.selector.class names, or None for unset (the leader serves every
consumer). The views handed in are the leader and the in-sync followers
that hold the fetch offset (the ReplicaManager builds them).
"""
from __future__ import annotations

from dataclasses import dataclass

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = ("", RACK_AWARE)


@dataclass(frozen=True)
class ReplicaView:
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


class RackAwareReplicaSelector:
    def select(self, client_rack: str | None, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
        if not client_rack:
            return leader
        same_rack = [r for r in replicas if r.rack == client_rack]
        if not same_rack or leader in same_rack:
            return leader
        return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))


def find_preferred_read_replica(p, selector: RackAwareReplicaSelector, client_rack: str, fetch_offset: int,
                                rack_of) -> int | None:
    """Kafka's ReplicaManager.findPreferredReadReplica: on the leader of partition `p`, the replica the
    selector picks among the leader and the in-sync followers whose logs hold `fetch_offset`, or None
    when that is the leader (or this broker does not lead `p`). `rack_of(broker_id)` is a broker's rack."""
    candidates = p.read_replica_candidates(fetch_offset)
    if candidates is None:
        return None
    views = [ReplicaView(b, rack_of(b), leo, lag_ms) for b, leo, lag_ms in candidates]
    leader = views[0]
    chosen = selector.select(client_rack, leader, views)
    return None if chosen == leader else chosen.broker_id


def selector(name: str | None) -> RackAwareReplicaSelector | None:
    if not name:
        return None
    if name == RACK_AWARE:
        return RackAwareReplicaSelector()
    raise ValueError(f"unknown replica.selector.class {name!r} (known: {RACK_AWARE})")
