"""AlterPartitionHandler: the controller's side of AlterPartition, a leader's ISR change.

Guarantees (Kafka's KafkaController.processAlterPartition): a change is
written only by the active controller, on its event thread, for a known
partition, from a live broker at the broker epoch the controller knows for it
(STALE_BROKER_EPOCH otherwise: an earlier or a not yet registered process of
that broker), from its current leader at its current leader epoch
(FENCED_LEADER_EPOCH otherwise) and partition version (INVALID_UPDATE_VERSION
otherwise); the new ISR must hold the leader, name no broker twice and only
live replicas (INVALID_REQUEST otherwise). The write is the controller's
versioned, epoch-fenced one; a lost race reloads the state from ZooKeeper and
answers INVALID_UPDATE_VERSION with it, ZooKeeper out of reach answers
NOT_CONTROLLER. The new ISR's eligible leader replicas follow KIP-966 where the controller has
them on (`partition_leader_election.partition_change`). Every answer but NOT_CONTROLLER and
UNKNOWN_TOPIC_OR_PARTITION carries the partition state as the controller
holds it. Mixed into KafkaController.
"""
from __future__ import annotations

import logging

from kazoo.exceptions import KazooException

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.common import zk_paths
from services.controller.context import LeaderIsr
from services.controller.partition_leader_election import partition_change

log = logging.getLogger(__name__)


class AlterPartitionHandler:
    """AlterPartition requests, and the partition state they answer with."""

    def alter_partition(self, req):
        """A leader's ISR change: checked against leader epoch and partition version, then a versioned write."""
        from eoslab.v1 import controller_pb2

        def run():
            if not self.active:
                return controller_pb2.AlterPartitionResponse(error=E.NOT_CONTROLLER)
            st = self.ctx.states.get((req.topic, req.partition))
            if st is None:
                return controller_pb2.AlterPartitionResponse(error=E.UNKNOWN_TOPIC_OR_PARTITION)
            current = self._state_proto(req.topic, req.partition)
            known = self.ctx.brokers.get(req.broker_id)
            if known is None or req.broker_epoch < known.epoch:     # not the process registered as that broker
                return controller_pb2.AlterPartitionResponse(error=E.STALE_BROKER_EPOCH, state=current)
            if st.leader != req.broker_id or st.leader_epoch != req.leader_epoch:
                return controller_pb2.AlterPartitionResponse(error=E.FENCED_LEADER_EPOCH, state=current)
            if st.zk_version != req.partition_epoch:
                return controller_pb2.AlterPartitionResponse(error=E.INVALID_UPDATE_VERSION, state=current)
            replicas = self.ctx.replicas(req.topic, req.partition)
            new_isr = list(req.new_isr)
            # Kafka's rule: the ISR is a set of live replicas that holds the leader (no broker twice)
            if req.broker_id not in new_isr or len(set(new_isr)) != len(new_isr) or \
                    any(b not in replicas or b not in self.ctx.brokers for b in new_isr):
                return controller_pb2.AlterPartitionResponse(error=E.INVALID_REQUEST, state=current)
            change = partition_change(st, replicas, set(self.ctx.brokers), self.rules(req.topic), target_isr=new_isr)
            try:
                if change is not None:
                    self._write_state(req.topic, req.partition, change)
            except RuntimeError:
                self._reload_state(req.topic, req.partition)
                return controller_pb2.AlterPartitionResponse(error=E.INVALID_UPDATE_VERSION,
                                                             state=self._state_proto(req.topic, req.partition))
            except KazooException as e:   # ZooKeeper out of reach or the session gone: this controller can
                log.warning("ISR change of %s-%d not written: %s", req.topic, req.partition,   # not act now
                            type(e).__name__)
                return controller_pb2.AlterPartitionResponse(error=E.NOT_CONTROLLER)
            self._sync_channels()
            return controller_pb2.AlterPartitionResponse(error=E.NONE,
                                                         state=self._state_proto(req.topic, req.partition))
        try:
            return self.call(run)
        except TimeoutError:          # the event thread did not get to it: the leader asks again
            return controller_pb2.AlterPartitionResponse(error=E.REQUEST_TIMED_OUT)

    def _reload_state(self, topic: str, p: int) -> None:
        sdata, stat = self.zk.get(zk_paths.partition_state_path(topic, p))
        s = zk_paths.decode(sdata)
        with self.lock:
            self.ctx.states[(topic, p)] = LeaderIsr.from_json(s, stat.version)

    def _state_proto(self, topic: str, p: int) -> broker_pb2.PartitionState:
        s = self.ctx.states[(topic, p)]
        return broker_pb2.PartitionState(topic=topic, partition=p, leader=s.leader, leader_epoch=s.leader_epoch,
                                         isr=s.isr, replicas=self.ctx.replicas(topic, p), zk_version=s.zk_version,
                                         controller_epoch=s.controller_epoch)
