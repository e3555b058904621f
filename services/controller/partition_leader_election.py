"""The leader and ISR a partition gets when brokers die (Kafka's
PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection), as a pure function.

Guarantees: a live leader keeps its leadership (only its ISR loses the dead); otherwise the first
live ISR member leads; with no live ISR member, a live replica outside the ISR leads only when
unclean election is allowed (and the ISR becomes that replica), else the partition is left with no
leader (-1) and keeps its last ISR, so a clean election can happen when an ISR member returns. A
new leader starts a new leader epoch; an ISR change under the same leader does not (KIP-497).
"""
from __future__ import annotations

from services.controller.context import LeaderIsr


def elect_after_broker_loss(st: LeaderIsr, replicas: list[int], live: set[int], unclean_allowed: bool
                            ) -> tuple[int, int, list[int]] | None:
    """(leader, leader epoch, ISR) for the partition when the brokers outside `live` are gone, or
    None when nothing changes."""
    leader_ok = st.leader in live
    isr = [b for b in st.isr if b in live]
    if leader_ok and isr == st.isr:
        return None
    if leader_ok:
        new_leader, new_isr = st.leader, isr
    else:
        candidates = isr or ([b for b in replicas if b in live] if unclean_allowed else [])
        if candidates:
            new_leader = candidates[0]
            new_isr = isr if isr else [new_leader]
        else:
            new_leader = -1
            new_isr = st.isr if not isr else isr
    if new_leader == st.leader and new_isr == st.isr:
        return None
    epoch = st.leader_epoch if new_leader == st.leader else st.leader_epoch + 1
    return new_leader, epoch, new_isr
