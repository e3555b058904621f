"""TransactionCoordinatorServer: one coordinator process: ZooKeeper registration, assignment, gRPC.

Guarantees: the coordinator creates __transaction_state (replication factor
`--transaction-state-replication-factor`, min.insync.replicas 2 when that
is at least 3) once enough brokers are up, and only then registers
/eoslab/txn_coordinators/<id>, so the controller assigns partitions of a
topic that exists; it re-registers after a lost session (a new session
means new coordinator epochs for whatever it is given); it serves a
partition only while the controller's assignment names its id, session and
epoch. Every request is answered with a Kafka error code. AddPartitionsToTxn
of a partition that does not exist (after a metadata refresh) is refused
with UNKNOWN_TOPIC_OR_PARTITION and adds nothing, so no transaction can hold
a partition its markers could never reach; producer ids and epochs outside
Kafka's ranges (id >= 0, epoch 0..32767; -1/-1 for a new InitProducerId)
are INVALID_REQUEST. One `Time` (`time`, SystemTime unless given) is handed
to every part (coordinator, state manager, marker channel, producer-id
manager, fault registry), and the server's own retry backoffs wait on it;
`stop()` ends them at once.
"""
from __future__ import annotations

import logging
import threading

from kazoo.client import KazooState

from clients.admin import create_topic
from eoslab.common.record_batch import MAX_PRODUCER_EPOCH
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from eoslab.v1 import broker_pb2, txn_pb2, txn_pb2_grpc
from services.common.producer_id_manager import ProducerIdManager
from services.common import internal_topics as it
from eoslab.common import rpc
from services.common import zk_paths
from services.common.zk_client import zk_client
from services.txn_coordinator.transaction_coordinator import TransactionCoordinator
from services.txn_coordinator.transaction_marker_channel_manager import TransactionMarkerChannelManager
from services.txn_coordinator.transaction_state_manager import TransactionStateManager

log = logging.getLogger(__name__)
PID_MANAGER_ID_BASE = 1000   # coordinators claim producer-id blocks as "broker" 1000 + id


class TransactionCoordinatorServer:
    def __init__(self, coordinator_id: int, listen: str, advertise: str, zk_connect: str, bootstrap: str,
                 session_timeout_ms: int = 2000, num_partitions: int = it.DEFAULT_TRANSACTION_STATE_PARTITIONS,
                 replication_factor: int = 3, kafka_listen: str | None = None, kafka_advertise: str | None = None,
                 enable_fault_injection: bool = False, time: Time = SYSTEM, kafka_version: str | None = None,
                 **coordinator_kw):
        self.time = time
        self.kafka_version = kafka_version          # the release whose request versions the Kafka listener serves
        self.coordinator_id = coordinator_id
        self.listen = listen
        self.kafka_listen = kafka_listen            # Kafka's binary protocol (services/kafka_protocol)
        self.kafka_advertise = kafka_advertise or kafka_listen
        self.kafka_listener = None
        self.host, self.port = rpc.split_address(advertise)
        self.zk = zk_client(zk_connect, session_timeout_ms)
        self.bootstrap = bootstrap
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.controller_address: str | None = None
        self.session = -1
        self.tsm = TransactionStateManager(coordinator_id, bootstrap, time=time)
        self.markers = TransactionMarkerChannelManager(bootstrap, time=time)
        self.pids = ProducerIdManager(PID_MANAGER_ID_BASE + coordinator_id, lambda: self.controller_address,
                                      lambda: -1, time=time)
        self.coordinator = TransactionCoordinator(self.tsm, self.markers, self.pids,
                                                  offsets_partitions=self._offsets_partitions, time=time,
                                                  **coordinator_kw)
        self.server = rpc.make_server()
        txn_pb2_grpc.add_TransactionCoordinatorServicer_to_server(TransactionCoordinatorService(self), self.server)
        self.faults = None                          # services/txn_coordinator/faults.py, with --enable-fault-injection
        if enable_fault_injection:
            from eoslab.v1 import faults_pb2_grpc
            from services.txn_coordinator.faults import CoordinatorFaultInjectorService, CoordinatorFaultRegistry
            self.faults = CoordinatorFaultRegistry(self.coordinator.end_txn, self.coordinator.transaction_open,
                                                   time=time)
            faults_pb2_grpc.add_FaultInjectorServicer_to_server(CoordinatorFaultInjectorService(self.faults),
                                                                self.server)
        self._stopping = threading.Event()
        self._assignment_data = None

    def _offsets_partitions(self) -> int:
        """__consumer_offsets' partition count; the brokers' default while it does not exist yet."""
        n = self.tsm.metadata.partitions_for(it.CONSUMER_OFFSETS_TOPIC)
        if n is None:
            try:
                self.tsm.metadata.refresh([it.CONSUMER_OFFSETS_TOPIC])
            except KafkaError:
                pass
            n = self.tsm.metadata.partitions_for(it.CONSUMER_OFFSETS_TOPIC)
        return n or it.DEFAULT_OFFSETS_PARTITIONS

    def start(self) -> None:
        if self.kafka_listen:      # bound before the gRPC server answers: readiness asks over gRPC only
            from services.kafka_protocol.coordinator_apis import CoordinatorApis
            from services.kafka_protocol.listener import KafkaListener
            self.kafka_listener = KafkaListener(self.kafka_listen,
                                                CoordinatorApis(self, TransactionCoordinatorService(self)),
                                                name=f"txn-coordinator-{self.coordinator_id}-kafka")
            self.kafka_listener.start()
        rpc.bind(self.server, self.listen)
        self.server.start()
        self.zk.add_listener(self._on_zk_state)
        zk_paths.connect(self.zk, (zk_paths.TXN_COORDINATORS,))
        self.zk.DataWatch(zk_paths.CONTROLLER, self._on_controller)
        self._ensure_topic()
        self.zk.DataWatch(zk_paths.TXN_COORDINATOR_ASSIGNMENT, self._on_assignment)
        self._register()
        self.coordinator.start()

    def _ensure_topic(self) -> None:
        md = self.tsm.metadata
        while not self._stopping.is_set():
            try:
                resp = md.refresh([it.TRANSACTION_STATE_TOPIC])
                if md.partitions_for(it.TRANSACTION_STATE_TOPIC):
                    return
                if len(resp.brokers) >= self.replication_factor:
                    configs = dict(it.INTERNAL_TOPIC_CONFIGS) if self.replication_factor >= 3 else {}
                    create_topic(md, it.TRANSACTION_STATE_TOPIC, self.num_partitions, self.replication_factor,
                                 configs=configs)
                    return
            except KafkaError as e:
                log.info("waiting to create %s: %s", it.TRANSACTION_STATE_TOPIC, e)
            self.time.wait_event(self._stopping, 0.2)

    def _on_zk_state(self, state) -> None:
        if state == KazooState.CONNECTED and self.session != -1 and not self._stopping.is_set():
            threading.Thread(target=self._register, daemon=True).start()

    def _register(self) -> None:
        path = zk_paths.txn_coordinator_path(self.coordinator_id)
        reg = {"host": self.host, "port": self.port}
        if self.kafka_advertise:
            from services.kafka_protocol.endpoints import registration_entry
            host, port = rpc.split_address(self.kafka_advertise)
            reg.update(registration_entry(host, port or self.kafka_listener.port))
        data = zk_paths.encode(reg)
        stat = zk_paths.register_ephemeral(
            self.zk, path, data, self._stopping.is_set, lambda: self.time.wait_event(self._stopping, 0.2),
            lambda: log.info("coordinator %d is still registered by an earlier session; waiting",
                             self.coordinator_id))
        if stat is None:
            return
        self.session = stat.czxid
        log.info("registered as transaction coordinator %d (session %d)", self.coordinator_id, self.session)
        self._apply_assignment()

    def _on_controller(self, data, stat) -> None:
        d = zk_paths.decode(data) if data else None
        self.controller_address = f"{d['host']}:{d['port']}" if d and "host" in d else None

    def _on_assignment(self, data, stat) -> None:
        self._assignment_data = data
        self._apply_assignment()

    def _apply_assignment(self) -> None:
        d = zk_paths.decode(self._assignment_data) if self._assignment_data else None
        parts = {int(p): a for p, a in (d or {}).get("partitions", {}).items()}
        mine = {p: a["epoch"] for p, a in parts.items()
                if a["coordinator"] == self.coordinator_id and a["session"] == self.session and self.session != -1}
        self.tsm.on_assignment(len(parts), mine)

    def stop(self) -> None:
        self._stopping.set()
        self.coordinator.stop()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass
        if self.kafka_listener is not None:
            self.kafka_listener.stop()
        self.server.stop(1).wait()
        self.tsm.close()
        self.markers.close()




def _producer_ok(pid: int, epoch: int) -> bool:
    return pid >= 0 and 0 <= epoch <= MAX_PRODUCER_EPOCH


class TransactionCoordinatorService(txn_pb2_grpc.TransactionCoordinatorServicer):
    def __init__(self, server: TransactionCoordinatorServer):
        self.s = server
        self.c = server.coordinator

    def _unknown_partitions(self, parts: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """The partitions the cluster's metadata does not have (asked again for topics the cache lacks)."""
        md = self.s.tsm.metadata

        def unknown():
            out = set()
            for t, p in parts:
                n = md.partitions_for(t)
                if n is None or not 0 <= p < n:
                    out.add((t, p))
            return out
        missing = unknown()
        if missing:
            try:
                md.refresh(sorted({t for t, _ in missing}))
            except KafkaError:
                return missing
            missing = unknown()
        return missing

    def InitProducerId(self, request, context):
        if not (request.producer_id == -1 and request.producer_epoch == -1) and \
                not _producer_ok(request.producer_id, request.producer_epoch):
            return broker_pb2.InitProducerIdResponse(error=E.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
        try:
            return self.c.init_producer_id(request)
        except Exception:  # noqa: BLE001 - a bug must not take the coordinator down
            log.exception("InitProducerId failed")
            return broker_pb2.InitProducerIdResponse(error=E.UNKNOWN_SERVER_ERROR, producer_id=-1, producer_epoch=-1)

    def AddPartitionsToTxn(self, request, context):
        parts = {(tp.topic, tp.partition) for tp in request.partitions}
        if not _producer_ok(request.producer_id, request.producer_epoch):
            return txn_pb2.AddPartitionsToTxnResponse(error=E.INVALID_REQUEST, partitions=[
                txn_pb2.AddPartitionsToTxnPartitionResult(topic=t, partition=p, error=E.INVALID_REQUEST)
                for t, p in sorted(parts)])
        unknown = set() if request.verify_only else self._unknown_partitions(parts)
        if unknown:   # Kafka: nothing is added (the others: OPERATION_NOT_ATTEMPTED, here the same code)
            return txn_pb2.AddPartitionsToTxnResponse(error=E.UNKNOWN_TOPIC_OR_PARTITION, partitions=[
                txn_pb2.AddPartitionsToTxnPartitionResult(topic=t, partition=p, error=E.UNKNOWN_TOPIC_OR_PARTITION)
                for t, p in sorted(parts)])
        try:
            err = self.c.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                        parts, request.verify_only)
        except Exception:  # noqa: BLE001
            log.exception("AddPartitionsToTxn failed")
            err = E.UNKNOWN_SERVER_ERROR
        if request.verify_only and err == E.NONE and self.s.faults is not None:
            self.s.faults.note_verified(request.transactional_id)
        return txn_pb2.AddPartitionsToTxnResponse(error=err, partitions=[
            txn_pb2.AddPartitionsToTxnPartitionResult(topic=t, partition=p, error=err) for t, p in sorted(parts)])

    def AddOffsetsToTxn(self, request, context):
        if not _producer_ok(request.producer_id, request.producer_epoch):
            return txn_pb2.AddOffsetsToTxnResponse(error=E.INVALID_REQUEST)
        try:
            return txn_pb2.AddOffsetsToTxnResponse(error=self.c.add_offsets(request))
        except Exception:  # noqa: BLE001
            log.exception("AddOffsetsToTxn failed")
            return txn_pb2.AddOffsetsToTxnResponse(error=E.UNKNOWN_SERVER_ERROR)

    def EndTxn(self, request, context):
        if not _producer_ok(request.producer_id, request.producer_epoch):
            return txn_pb2.EndTxnResponse(error=E.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
        try:
            resp = self.c.end_txn(request)
            if self.s.faults is not None:
                self.s.faults.after_end_txn(request)
            return resp
        except Exception:  # noqa: BLE001
            log.exception("EndTxn failed")
            return txn_pb2.EndTxnResponse(error=E.UNKNOWN_SERVER_ERROR, producer_id=-1, producer_epoch=-1)

    def DescribeTransactions(self, request, context):
        tsm = self.s.tsm
        with tsm.lock:
            owned = [txn_pb2.OwnedPartition(partition=p, coordinator_epoch=op.coordinator_epoch, loading=op.loading)
                     for p, op in sorted(tsm.owned.items())]
        return txn_pb2.DescribeTransactionsResponse(
            coordinator_id=self.s.coordinator_id, owned=owned, num_partitions=tsm.num_partitions,
            transactions=self.c.describe(set(request.transactional_ids)))
