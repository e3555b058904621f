"""BrokerService: the broker's gRPC servicer (Kafka's KafkaApis for the lab's RPCs), each method handed
to the KafkaServer's parts.

Guarantees: every request gets an answer with Kafka's error codes; an unexpected fault in a produce
becomes UNKNOWN_SERVER_ERROR for its partitions (logged), never a dead broker; the admin requests
(CreateTopics, CreatePartitions, DeleteTopics, topic configs) are forwarded to the active controller,
waiting through a failover up to FORWARD_WAIT_S (NOT_CONTROLLER when there is still none or it cannot
be reached), while Metadata's auto-creation does not wait;
a transactional batch without the request's transactional.id is refused whole where the release
requires one.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import grpc

from eoslab.v1 import broker_pb2, broker_pb2_grpc
from eoslab.common import rpc
from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from services.broker.auto_topic_creation import unknown_topics

if TYPE_CHECKING:
    from services.broker.kafka_server import KafkaServer

log = logging.getLogger("services.broker.kafka_server")


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(self, server: KafkaServer):
        self.s = server
        self.rm = server.replica_manager

    def Metadata(self, request, context):
        resp = self.s.metadata.metadata(list(request.topics))
        if request.topics and request.allow_auto_topic_creation:     # a coordinator asking for its Kafka client
            unknown_topics(resp, getattr(self.s, "auto_create_topics_enable", True),
                           lambda pb: self.create_topics(pb, 0.0), getattr(self.s, "num_partitions", 1))
        return resp

    def CreateTopics(self, request, context):
        """Kafka's CreateTopics, handed to the active controller (waiting up to FORWARD_WAIT_S for one)."""
        return self.create_topics(request, self.FORWARD_WAIT_S)

    def create_topics(self, request, wait_s: float):
        return self._to_controller("CreateTopics", request, lambda msg: broker_pb2.CreateTopicsResponse(
            topics=[broker_pb2.CreateTopicResult(name=t.name, error=E.NOT_CONTROLLER, error_message=msg)
                    for t in request.topics]), wait_s)

    def create_partitions(self, request):
        """Kafka's CreatePartitions, handed to the active controller (not a gRPC method of the broker)."""
        from eoslab.v1 import controller_pb2
        return self._to_controller("CreatePartitions", request, lambda msg: controller_pb2.CreatePartitionsResponse(
            results=[controller_pb2.CreatePartitionsResult(name=t.name, error=E.NOT_CONTROLLER, error_message=msg)
                     for t in request.topics]))

    def delete_topics(self, request):
        """Kafka's DeleteTopics, handed to the active controller (not a gRPC method of the broker)."""
        from eoslab.v1 import controller_pb2
        return self._to_controller("DeleteTopics", request, lambda msg: controller_pb2.DeleteTopicsResponse(
            results=[controller_pb2.DeleteTopicResult(name=n, error=E.NOT_CONTROLLER, error_message=msg)
                     for n in request.names]))

    def alter_topic_configs(self, request):
        """Kafka's AlterConfigs / IncrementalAlterConfigs for topics, handed to the active controller."""
        from eoslab.v1 import controller_pb2
        return self._to_controller("AlterTopicConfigs", request, lambda msg: controller_pb2.AlterTopicConfigsResponse(
            results=[controller_pb2.AlterTopicConfigResult(topic=t.topic, error=E.NOT_CONTROLLER, error_message=msg)
                     for t in request.topics]))

    # How long a forwarded admin request waits for a reachable controller, as Kafka's forwarding
    # manager queues a request through a controller failover instead of failing it at once.
    FORWARD_WAIT_S = 15.0

    def _to_controller(self, method: str, request, failed, wait_s: float | None = None):
        """The active controller's answer to `method`, or `failed(why)` (NOT_CONTROLLER) when for
        `wait_s` there is none or it cannot be reached. The controller's address is read again before
        every try (a failover moves it); only UNAVAILABLE is retried, never an answer or a deadline. The
        wait reads the server's `Time`."""
        from eoslab.v1 import controller_pb2_grpc
        wait_s = self.FORWARD_WAIT_S if wait_s is None else wait_s
        clock = self.s.time
        deadline, pause = clock.monotonic() + wait_s, 0.05
        while True:
            addr = self.s.controller_address
            if addr is None:
                why = "no active controller"
            else:
                try:
                    with rpc.channel(addr) as ch:
                        return getattr(controller_pb2_grpc.ControllerStub(ch), method)(request, timeout=30)
                except grpc.RpcError as e:
                    why = f"controller unreachable: {e.code()}"
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        return failed(why)
            if clock.monotonic() + pause > deadline:
                return failed(why)
            clock.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _produce(self, request):
        if self.s.transactional_produce_needs_id and not request.transactional_id and \
                any(pd.batch.attributes & rb.TRANSACTIONAL_FLAG for pd in request.partitions):
            resp = broker_pb2.ProduceResponse(correlation_id=request.correlation_id)
            for pd in request.partitions:         # Kafka answers the whole request so, appending nothing
                resp.partitions.add(topic=pd.topic, partition=pd.partition, base_offset=-1,
                                    error=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    error_message="transactional batches need the request's transactional.id")
            return resp
        try:
            return self.rm.append_records(request)
        except Exception as e:  # noqa: BLE001 - a bug must not take the broker down
            log.exception("produce failed")
            resp = broker_pb2.ProduceResponse(correlation_id=request.correlation_id)
            for pd in request.partitions:
                resp.partitions.add(topic=pd.topic, partition=pd.partition, base_offset=-1,
                                    error=E.UNKNOWN_SERVER_ERROR, error_message=str(e))
            return resp

    def Produce(self, request, context):
        resp = self._produce(request)
        if self.s.faults.should_drop(request):
            context.abort(grpc.StatusCode.UNAVAILABLE, "response lost (lost-ack fault)")
        return resp

    def ProduceStream(self, request_iterator, context):
        # A stream is Kafka's connection: answers go out in request order. Once an answer is lost
        # (lost-ack fault), no later answer on this connection reaches the producer either (a later
        # ACK cannot overtake a lost one over TCP); requests are still appended until the producer's
        # request timeout closes the stream.
        lost = False
        for request in request_iterator:
            resp = self._produce(request)
            if self.s.faults.should_drop(request):
                lost = True
            if lost or request.acks == 0:
                continue
            yield resp

    def Fetch(self, request, context):
        cancelled, done = threading.Event(), threading.Event()   # the caller went away: free this thread

        def gone():
            if not done.is_set():       # (also called after a normal answer: then nobody needs waking)
                cancelled.set()
                self.rm.wake_fetches()
        if context is not None and not context.add_callback(gone):
            cancelled.set()
        try:
            return self.rm.fetch(request, cancelled)
        finally:
            done.set()

    def ReplicaFetch(self, request_iterator, context):
        # A follower's fetch session: each request answered in order, each long poll ended early when
        # the follower goes away (its stream ends or breaks).
        cancelled = threading.Event()

        def gone():
            cancelled.set()
            self.rm.wake_fetches()
        if context is not None and not context.add_callback(gone):
            return
        for request in request_iterator:
            yield self.rm.fetch(request, cancelled)
            if cancelled.is_set():
                return

    def ListOffsets(self, request, context):
        return self.rm.list_offsets(request)

    def InitProducerId(self, request, context):
        if request.transactional_id:
            return broker_pb2.InitProducerIdResponse(error=E.NOT_COORDINATOR, producer_id=-1, producer_epoch=-1)
        err, pid = self.s.pid_manager.generate_producer_id()
        if err != E.NONE:
            return broker_pb2.InitProducerIdResponse(error=err, producer_id=-1, producer_epoch=-1)
        return broker_pb2.InitProducerIdResponse(error=E.NONE, producer_id=pid, producer_epoch=0)

    def OffsetsForLeaderEpoch(self, request, context):
        return self.rm.offsets_for_leader_epoch(request)

    def LeaderAndIsr(self, request, context):
        if self.s.broker_epoch_stale(request.broker_epoch):
            return broker_pb2.LeaderAndIsrResponse(error=E.STALE_BROKER_EPOCH)
        return self.rm.become_leader_or_follower(request)

    def StopReplica(self, request, context):
        if self.s.broker_epoch_stale(request.broker_epoch):
            return broker_pb2.StopReplicaResponse(error=E.STALE_BROKER_EPOCH)
        return self.rm.stop_replicas(request)

    def FindCoordinator(self, request, context):
        return self.s.find_coordinator(request)

    def WriteTxnMarkers(self, request, context):
        return self.rm.write_txn_markers(request)

    def JoinGroup(self, request, context):
        return self.s.group_coordinator.join(request)

    def SyncGroup(self, request, context):
        return self.s.group_coordinator.sync(request)

    def Heartbeat(self, request, context):
        return self.s.group_coordinator.heartbeat(request)

    def LeaveGroup(self, request, context):
        return self.s.group_coordinator.leave(request)

    def OffsetCommit(self, request, context):
        return self.s.group_coordinator.offset_commit(request)

    def TxnOffsetCommit(self, request, context):
        return self.s.group_coordinator.txn_offset_commit(request)

    def OffsetFetch(self, request, context):
        return self.s.group_coordinator.offset_fetch(request)

    def TransactionMetrics(self, request, context):
        late, longest, where = self.rm.transaction_metrics()
        return broker_pb2.TransactionMetricsResponse(broker_id=self.s.broker_id,
                                                     partitions_with_late_transactions_count=late,
                                                     max_active_transaction_duration_ms=longest,
                                                     max_active_transaction_partition=where)

    def GroupMetrics(self, request, context):
        gc = self.s.group_coordinator
        with gc.lock:
            counts = [(g, n, who) for g, (n, who) in gc.unstable_fetches.items()
                      if n > 0 and (not request.group_id or g == request.group_id)]
        return broker_pb2.GroupMetricsResponse(broker_id=self.s.broker_id, groups=[
            broker_pb2.GroupOffsetFetchMetrics(group_id=g, unstable_offsets_fetched_without_require_stable=n,
                                               last_client_id=who) for g, n, who in sorted(counts)])

    def UpdateMetadata(self, request, context):
        if self.s.broker_epoch_stale(request.broker_epoch):
            return broker_pb2.UpdateMetadataResponse(error=E.STALE_BROKER_EPOCH)
        if not self.rm.check_controller_epoch(request.controller_epoch):
            return broker_pb2.UpdateMetadataResponse(error=E.STALE_CONTROLLER_EPOCH)
        changed = self.s.metadata.update(request)
        if changed:
            self.rm.update_topic_configs(changed)
        return broker_pb2.UpdateMetadataResponse(error=E.NONE)
