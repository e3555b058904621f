"""PartitionStateMachine: every write of a partition's leader, ISR and ELR by the active controller.

Guarantees (Kafka's PartitionStateMachine and ReplicationControlManager): each change is computed
by `partition_leader_election.partition_change` under the topic's rules (unclean election,
min.insync.replicas, and KIP-966's eligible leader replicas where the controller has them on), and
written with a versioned ZooKeeper transaction fenced by the controller epoch before the in-memory
context changes. Brokers lost move leadership off them; brokers back from an unclean shutdown leave
every ISR and ELR before any election can pick them, once per registration: the removal is marked
done per broker epoch in ZooKeeper, so a controller that takes over applies any removal its
predecessor did not finish and never repeats one. Mixed into KafkaController.
"""
from __future__ import annotations

import logging

from kazoo.exceptions import NoNodeError

from services.common import zk_paths
from services.controller.context import LeaderIsr, check_fenced
from services.controller.partition_leader_election import ElectionRules, partition_change

log = logging.getLogger(__name__)


class StalePartitionState(RuntimeError):
    """A partition-state write found the znode at another version; its state has been read again."""


class PartitionStateMachine:
    """Elections and partition-state writes (needs ctx, zk, lock, epoch, epoch_zk_version, elr_enabled,
    default_min_isr from KafkaController)."""

    def rules(self, topic: str) -> ElectionRules:
        return ElectionRules(self.ctx.unclean_allowed(topic), self.elr_enabled,
                             self.ctx.min_isr(topic, self.default_min_isr))

    def _elect_offline_partitions(self, gone: set[int]) -> None:
        """Move leadership off dead brokers and onto live ones; bump the leader epoch of each change."""
        live = set(self.ctx.brokers) - gone
        for (topic, p), st in sorted(self.ctx.states.items()):
            new = partition_change(st, self.ctx.replicas(topic, p), live, self.rules(topic))
            if new is not None:
                self._write_state(topic, p, new)

    def _remove_unclean(self, brokers: frozenset[int]) -> None:
        """KIP-966 (Kafka's ReplicationControlManager.handleBrokerUncleanShutdown): brokers whose
        previous process did not shut down cleanly may have lost their unflushed tail, so they leave
        every ISR and ELR; then leaders are elected where a partition has none."""
        live = set(self.ctx.brokers)
        for (topic, p), st in sorted(self.ctx.states.items()):
            if not brokers & (set(st.isr) | set(st.elr)):
                continue
            new = partition_change(st, self.ctx.replicas(topic, p), live, self.rules(topic),
                                   target_isr=[b for b in st.isr if b not in brokers], unclean_shutdown=brokers)
            if new is not None:
                self._write_state(topic, p, new)
        for b in sorted(brokers):
            if b in self.ctx.brokers:
                self._mark_unclean_shutdown_handled(b, self.ctx.brokers[b].epoch)
        self._elect_offline_partitions(set())

    def _unclean_shutdowns_owed(self) -> frozenset[int]:
        """Live brokers registered as back from an unclean shutdown that no controller has taken out of the
        ISRs and ELRs yet (no handled mark for this broker epoch): the removal is owed once per
        registration, so a controller that takes over re-applies it exactly when its predecessor did not."""
        if not self.elr_enabled:
            return frozenset()
        owed = set()
        for b, info in self.ctx.brokers.items():
            if not info.unclean_shutdown:
                continue
            try:
                data, _ = self.zk.get(zk_paths.unclean_shutdown_handled_path(b))
                handled = zk_paths.decode(data).get("broker_epoch")
            except NoNodeError:
                handled = None
            if handled != info.epoch:
                owed.add(b)
        return frozenset(owed)

    def _mark_unclean_shutdown_handled(self, broker_id: int, broker_epoch: int) -> None:
        """Record, fenced by the controller epoch, that this registration's removal is done."""
        path = zk_paths.unclean_shutdown_handled_path(broker_id)
        data = zk_paths.encode({"broker_epoch": broker_epoch})
        tx = self.zk.transaction()
        tx.check(zk_paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        if self.zk.exists(path):
            tx.set_data(path, data)
        else:
            tx.create(path, data)
        check_fenced(tx.commit())

    def _write_state(self, topic: str, p: int, new: LeaderIsr) -> None:
        """Versioned write of one partition state, fenced by the controller epoch's znode version."""
        cur = self.ctx.states[(topic, p)]
        new.controller_epoch = self.epoch
        tx = self.zk.transaction()
        tx.check(zk_paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        tx.set_data(zk_paths.partition_state_path(topic, p), zk_paths.encode(new.to_json()), cur.zk_version)
        results = check_fenced(tx.commit())
        if isinstance(results[1], Exception):
            # the znode moved on without this controller: another write, or this controller's own whose
            # answer a connection loss took. As Kafka's elections re-read the states they retry, the state
            # is read again before the event's retry computes from it.
            sdata, stat = self.zk.get(zk_paths.partition_state_path(topic, p))
            with self.lock:
                self.ctx.states[(topic, p)] = LeaderIsr.from_json(zk_paths.decode(sdata), stat.version)
            raise StalePartitionState(f"{topic}-{p}: {results[1]!r}; read again, the event is retried")
        new.zk_version = results[1].version
        with self.lock:
            self.ctx.states[(topic, p)] = new
        log.info("%s-%d: leader %d, leader epoch %d, isr %s%s", topic, p, new.leader, new.leader_epoch, new.isr,
                 f", elr {new.elr}, last known elr {new.last_known_elr}" if self.elr_enabled else "")
