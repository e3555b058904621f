"""The leader, ISR and eligible leader replicas a partition gets from a change (Kafka's
PartitionChangeBuilder in KRaft, offlinePartitionLeaderElection in ZooKeeper mode), as a pure function.

Guarantees of `partition_change(st, replicas, live, rules, ...)`, which returns the new LeaderIsr or
None when nothing changes:
- The target ISR is the given one (a leader's AlterPartition) or else the current ISR without the
  brokers outside `live` (brokers lost), in both cases without the brokers in `unclean_shutdown`.
- A live leader in the target ISR keeps its leadership and its leader epoch (an ISR change does not
  bump it, KIP-497); otherwise the first live member of the target ISR leads in a new leader epoch.
- Without eligible leader replicas (`rules.elr_enabled` False, every release before KIP-966): with
  no live ISR member a live replica outside the ISR leads only when unclean election is allowed (and
  the ISR becomes that replica), else the partition has no leader (-1) and keeps its last ISR, so a
  clean election can happen when an ISR member returns. `unclean_shutdown` is ignored there, as
  Kafka ignores it before ELR.
- With eligible leader replicas (KIP-966): while the target ISR is smaller than `rules.min_isr` the
  ELR holds every replica that was in the ISR or the ELR, is not in the target ISR and did not shut
  down uncleanly; once the ISR reaches min.insync.replicas the ELR and the last known leader are
  cleared. The ISR may become empty. With an empty ISR a live ELR member leads (the ISR becomes it
  and it leaves the ELR); with ISR and ELR empty the last known leader (the leader when the ISR
  emptied) leads once it is live, alone in the ISR, as an unclean election; then, where the topic
  allows it, any live replica (an unclean election clears the ELR). A replica that lost its
  unflushed tail (an unclean shutdown) therefore never leads while an eligible replica remains.
"""
from __future__ import annotations

from dataclasses import dataclass

from services.controller.context import LeaderIsr


@dataclass(frozen=True)
class ElectionRules:
    unclean_allowed: bool = False          # the topic's unclean.leader.election.enable
    elr_enabled: bool = False              # KIP-966 (eligible.leader.replicas)
    min_isr: int = 1                       # the topic's min.insync.replicas


def partition_change(st: LeaderIsr, replicas: list[int], live: set[int], rules: ElectionRules,
                     target_isr: list[int] | None = None, unclean_shutdown: frozenset[int] = frozenset()
                     ) -> LeaderIsr | None:
    """The partition's next state (controller_epoch and zk_version copied from `st`), or None."""
    gone_bad = unclean_shutdown if rules.elr_enabled else frozenset()
    isr = list(target_isr) if target_isr is not None else [b for b in st.isr if b in live]
    isr = [b for b in isr if b not in gone_bad]
    elr: list[int] = []
    last_known = list(st.last_known_elr) if rules.elr_enabled else []
    if rules.elr_enabled:
        if len(isr) >= rules.min_isr:
            last_known = []
        else:
            was = set(st.elr) | set(st.isr)
            elr = [b for b in replicas if b in was and b not in isr and b not in gone_bad]

    def valid(b: int) -> bool:
        return b in live and (b in isr or (not isr and b in elr))

    unclean = False
    if st.leader >= 0 and valid(st.leader):
        leader = st.leader
    else:
        pick = next((b for b in isr if b in live), None)
        if pick is None and not isr:
            pick = next((b for b in elr if b in live), None)
            if pick is not None:                       # an eligible replica: a clean election
                isr, elr = [pick], [b for b in elr if b != pick]
        if pick is None and rules.elr_enabled and not isr and not elr and len(st.last_known_elr) == 1 \
                and st.last_known_elr[0] in live:
            pick, unclean = st.last_known_elr[0], True
        if pick is None and rules.unclean_allowed:
            pick = next((b for b in replicas if b in live), None)
            unclean = pick is not None
        if pick is None:
            leader = -1
            if not rules.elr_enabled and not isr:
                isr = list(st.isr)                     # before ELR the ISR never empties
        else:
            leader = pick
            if unclean:
                isr, elr, last_known = [pick], [], []
    if rules.elr_enabled:
        if not isr and st.isr and st.leader >= 0 and st.last_known_elr != [st.leader]:
            last_known = [st.leader]                   # the partition just lost its last in-sync replica
        elif leader >= 0:
            last_known = []
    if (leader, isr, elr, last_known) == (st.leader, st.isr, st.elr, st.last_known_elr):
        return None
    epoch = st.leader_epoch if leader == st.leader else st.leader_epoch + 1
    return LeaderIsr(leader, epoch, isr, st.controller_epoch, st.zk_version, elr, last_known)
