"""The controller's gRPC face: Controller service over a KafkaController.

Guarantees: a standby controller answers NOT_CONTROLLER (and names the
active one in DescribeCluster); an exhausted or unreachable ZooKeeper gives a
Kafka error code, never a crashed service.
"""
from __future__ import annotations

import logging

from kazoo.exceptions import KazooException, NoNodeError

from eoslab.v1 import controller_pb2, controller_pb2_grpc
from services.common import zk_paths
from services.controller.kafka_controller import KafkaController
from services.controller.producer_id_manager import ProducerIdsExhausted
from eoslab.common.errors import E

log = logging.getLogger(__name__)


class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: KafkaController):
        self.c = controller

    def AllocateProducerIds(self, request, context):
        try:
            err, block = self.c.allocate_producer_ids(request.broker_id, request.broker_epoch)
        except ProducerIdsExhausted as e:
            log.error("%s", e)
            return controller_pb2.AllocateProducerIdsResponse(error=E.UNKNOWN_SERVER_ERROR)
        except KazooException as e:
            log.warning("producer id block allocation failed: %r", e)
            return controller_pb2.AllocateProducerIdsResponse(error=E.COORDINATOR_NOT_AVAILABLE)
        if block is None:
            return controller_pb2.AllocateProducerIdsResponse(error=err)
        return controller_pb2.AllocateProducerIdsResponse(error=E.NONE, producer_id_start=block.first_id,
                                                          producer_id_len=block.size)

    def CreateTopics(self, request, context):
        return self.c.create_topics(request)

    def CreatePartitions(self, request, context):
        return self.c.create_partitions(request)

    def DeleteTopics(self, request, context):
        return self.c.delete_topics(request)

    def AlterTopicConfigs(self, request, context):
        return self.c.alter_topic_configs(request)

    def AlterPartition(self, request, context):
        if not self.c.active:
            return controller_pb2.AlterPartitionResponse(error=E.NOT_CONTROLLER)
        return self.c.alter_partition(request)

    def DescribeCluster(self, request, context):
        c = self.c
        with c.lock:
            if c.active:
                resp = controller_pb2.DescribeClusterResponse(
                    error=E.NONE, controller_id=c.controller_id, controller_epoch=c.epoch)
                for b in c.ctx.brokers.values():
                    resp.live_brokers.add(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack or "")
                for (t, p), s in c.ctx.states.items():
                    resp.partition_states.add(topic=t, partition=p, leader=s.leader, leader_epoch=s.leader_epoch,
                                              isr=s.isr, replicas=c.ctx.replicas(t, p), zk_version=s.zk_version,
                                              controller_epoch=s.controller_epoch, eligible_leader_replicas=s.elr,
                                              last_known_elr=s.last_known_elr)
                return resp
        try:
            data, _ = c.zk.get(zk_paths.CONTROLLER)
            active = zk_paths.decode(data).get("brokerid", -1)
        except (NoNodeError, KazooException):
            active = -1
        return controller_pb2.DescribeClusterResponse(error=E.NOT_CONTROLLER, controller_id=active)
