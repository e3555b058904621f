"""KafkaServer: one broker process: ZooKeeper registration, replica manager, gRPC services.

Guarantees: the broker registers in ZooKeeper only after its gRPC server
listens, re-registers after a lost session, and answers every request with a
Kafka error code (an unexpected fault becomes UNKNOWN_SERVER_ERROR for that
partition, never a dead broker). On SIGTERM it deregisters, snapshots
producer state and closes its logs. The server hands the `Time` it was given
(SYSTEM in a real broker) to the replica manager, the group coordinator and
the producer id manager, and its own retry pauses and timestamps read it too.
"""
from __future__ import annotations

import dataclasses
import logging
import threading

import grpc
from kazoo.client import KazooState

from eoslab.v1 import broker_pb2, broker_pb2_grpc, common_pb2, faults_pb2_grpc
from services.common.faults import FaultInjectorService, FaultRegistry
from services.broker.broker_service import BrokerService
from services.broker.checkpoints import consume_broker_clean_shutdown, write_broker_clean_shutdown
from services.broker.group_coordinator import GroupCoordinator
from services.broker import replica_selector as replica_selectors
from services.broker.metadata_cache import MetadataCache
from services.broker.log_config import LogConfig
from services.common.producer_id_manager import ProducerIdManager
from services.broker.replica_manager import ReplicaManager
from services.common import internal_topics as it
from eoslab.common import rpc
from services.broker.authorizer import AclAuthorizer
from services.common import entity_configs
from services.common.change_notifications import ChangeNotificationListener, config_change_handler
from services.broker.dynamic_config import DynamicBrokerConfig
from services.broker.group_configs import GroupConfigs
from services.common import zk_paths
from services.common.zk_client import zk_client
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)

REGISTRATION_RETRY_BACKOFF_S = 0.2      # an earlier session still holds our znode, or ZooKeeper is out of reach
ALTER_PARTITION_RETRY_BACKOFF_S = 0.2   # after a refused ISR change, before the ISR loop may ask again


class KafkaServer:
    def __init__(self, broker_id: int, listen: str, advertise: str, zk_connect: str, data_dir: str,
                 session_timeout_ms: int, log_config: LogConfig, fault_injection: bool = False,
                 kafka_listen: str | None = None, kafka_advertise: str | None = None, time: Time = SYSTEM,
                 auto_create_topics_enable: bool = True, txn_offset_commit_verification: bool = False,
                 transactional_produce_needs_id: bool = True, num_partitions: int = 1,
                 kafka_version: str | None = None, consumer_groups: dict | None = None,
                 authorizer: dict | None = None, group_config_bounds: dict | None = None,
                 rack: str | None = None, replica_selector: str = "", log_cleaner: dict | None = None):
        self.time = time
        self.rack = rack                         # broker.rack, in its registration as Kafka writes it
        # Kafka 2.2+: transactional batches need the request's transactional.id (KafkaApis.handleProduceRequest)
        self.transactional_produce_needs_id = transactional_produce_needs_id
        self.auto_create_topics_enable = auto_create_topics_enable   # Kafka Metadata creates unknown topics
        self.num_partitions = num_partitions     # Kafka's num.partitions: auto-created topics, CreateTopics -1
        self.kafka_version = kafka_version       # the release whose request versions the Kafka listener serves
        self.config = None                       # the BrokerConfig it started with (DescribeConfigs of the broker)
        self.broker_id = broker_id
        self.listen = listen
        self.kafka_listen = kafka_listen            # Kafka's binary protocol (services/kafka_protocol)
        self.kafka_advertise = kafka_advertise or kafka_listen
        self.kafka_listener = None
        self.host, self.port = rpc.split_address(advertise)
        self.zk = zk_client(zk_connect, session_timeout_ms)
        # authorizer.class.name: None (no authorizer) or AclAuthorizer's settings (super_users, allow_if_no_acls)
        self.authorizer = None if authorizer is None else AclAuthorizer(self.zk, **authorizer)
        self.broker_epoch = -1
        self.controller_address: str | None = None
        self._max_issued_pid = -1
        self.metadata = MetadataCache()
        self.data_dir = data_dir
        # KIP-966: the controller drops a broker back from an unclean shutdown from every ISR and ELR
        self.unclean_shutdown = not consume_broker_clean_shutdown(data_dir)
        self._registered_once = False
        self.replica_manager = ReplicaManager(broker_id, data_dir, log_config, self.metadata,
                                              self.producer_id_known, self.alter_partition, self.verify_txn,
                                              time=time, replica_selector=replica_selectors.selector(replica_selector),
                                              log_cleaner=log_cleaner)
        # KAFKA-15449 (3.7): TxnOffsetCommit verified, under transaction.partition.verification.enable
        self.group_coordinator = GroupCoordinator(
            self.replica_manager, self.metadata, log_config.txn_offset_commit_member_check, time=time,
            txn_offset_commit_verification=txn_offset_commit_verification and log_config.transaction_verification,
            consumer_groups=consumer_groups)
        # KIP-848 group configs (IncrementalAlterConfigs on a GROUP), applied by the consumer groups' coordinator
        cg = self.group_coordinator.consumer_groups
        self.group_configs = GroupConfigs(self.zk, cg.session_timeout_ms, cg.heartbeat_interval_ms,
                                          **(group_config_bounds or {"session_bounds": (1, 2 ** 31 - 1),
                                                                     "heartbeat_bounds": (1, 2 ** 31 - 1)}))
        cg.group_config = self.group_configs.of
        # dynamic broker configs (AlterConfigs on this broker or the cluster default), applied to the log defaults
        self._static_log_config = dataclasses.replace(log_config)
        self.dynamic_config = DynamicBrokerConfig(self.zk, broker_id, self._apply_dynamic_config)
        self.config_changes = ChangeNotificationListener(
            self.zk, entity_configs.CHANGES, config_change_handler({"groups": self.group_configs.changed,
                                                                   "brokers": self.dynamic_config.changed}),
            name=f"broker-{broker_id}-config-changes", time=time)
        self.txn_assignment: dict[int, dict] = {}   # __transaction_state partition -> owner (from ZooKeeper)
        self.channels = rpc.ChannelCache()
        self._creating_offsets_topic = False
        self.pid_manager = ProducerIdManager(broker_id, lambda: self.controller_address,
                                             lambda: self.broker_epoch, time=time)
        self.faults = FaultRegistry()
        self.server = rpc.make_server()
        broker_pb2_grpc.add_BrokerServicer_to_server(BrokerService(self), self.server)
        if fault_injection:
            faults_pb2_grpc.add_FaultInjectorServicer_to_server(FaultInjectorService(self.faults), self.server)
        self._stopping = False

    def start(self) -> None:
        rpc.bind(self.server, self.listen)
        self.server.start()
        self.zk.add_listener(self._on_zk_state)
        zk_paths.connect(self.zk, (zk_paths.BROKER_IDS,))
        if self.authorizer is not None:      # as Kafka's broker: the ACLs are loaded before a client is served
            self.authorizer.start()
        # one listener for /config/changes (Kafka's ZkConfigManager), started before the loads it covers;
        # the loads wait out a connection loss (a broker that starts during a ZooKeeper fault)
        self.config_changes.start()
        retry = zk_paths.retrying(self.zk)
        retry(self.group_configs.load, raise_errors=True)
        retry(self.dynamic_config.reload)
        if self.kafka_listen:
            from services.kafka_protocol.broker_apis import BrokerApis
            from services.kafka_protocol.listener import KafkaListener
            self.kafka_listener = KafkaListener(self.kafka_listen, BrokerApis(self, BrokerService(self)),
                                                name=f"broker-{self.broker_id}-kafka")
            self.kafka_listener.start()
        self.zk.DataWatch(zk_paths.CONTROLLER, self._on_controller)
        self.zk.DataWatch(zk_paths.TXN_COORDINATOR_ASSIGNMENT, self._on_txn_assignment)
        self._register()

    # Kafka's DynamicLogConfig and DynamicProducerStateManagerConfig, for the settings the lab's log models
    DYNAMIC_LOG_SETTINGS = {"message.max.bytes": ("max_message_bytes", int), "log.segment.bytes": ("segment_bytes", int),
                            "min.insync.replicas": ("min_insync_replicas", int),
                            "log.flush.interval.messages": ("flush_messages", int),
                            "log.flush.interval.ms": ("flush_ms", int),
                            "log.roll.ms": ("segment_ms", int),
                            "log.cleaner.delete.retention.ms": ("delete_retention_ms", int),
                            "log.cleaner.min.compaction.lag.ms": ("min_compaction_lag_ms", int),
                            "log.cleaner.max.compaction.lag.ms": ("max_compaction_lag_ms", int),
                            "log.cleaner.min.cleanable.ratio": ("min_cleanable_dirty_ratio", float),
                            "log.segment.delete.delay.ms": ("file_delete_delay_ms", int),
                            "log.message.timestamp.type": ("default_timestamp_type", str),
                            "compression.type": ("default_compression_type", str),
                            "transaction.partition.verification.enable":
                                ("transaction_verification", lambda v: v.strip().lower() == "true"),
                            "producer.id.expiration.ms": ("producer_id_expiration_ms", int)}

    def _apply_dynamic_config(self, overrides: dict[str, str]) -> None:
        """The log defaults are the static ones with the dynamic values in force; every partition here
        takes them at once, under its topic's own configs (Kafka's DynamicLogConfig.reconfigure)."""
        defaults = self.replica_manager.defaults
        for name, (field_name, parse) in self.DYNAMIC_LOG_SETTINGS.items():
            value = parse(overrides[name]) if name in overrides else getattr(self._static_log_config, field_name)
            setattr(defaults, field_name, value)
        defaults.default_compacted = "compact" in (overrides.get("log.cleanup.policy") or "delete").split(",")
        with self.replica_manager.lock:
            topics = {t for t, _ in self.replica_manager.partitions}
        self.replica_manager.update_topic_configs(topics)

    def _on_zk_state(self, state) -> None:
        if state == KazooState.CONNECTED and self.broker_epoch != -1 and not self._stopping:
            threading.Thread(target=self._register, daemon=True).start()

    def broker_epoch_stale(self, request_epoch: int) -> bool:
        """Whether a controller request is not for this process (Kafka's isBrokerEpochStale, KIP-380):
        this process has not registered yet (a restart within the old session's timeout: the controller
        still knows the process before), or the request names an older registration than ours. 0 is a
        request that names none."""
        current = self.broker_epoch
        return current == -1 or 0 < request_epoch < current or request_epoch == -1

    def _register(self) -> None:
        path = zk_paths.broker_path(self.broker_id)
        reg = {"version": 5, "host": self.host, "port": self.port, "timestamp": str(self.time.milliseconds())}
        if self.rack is not None:
            reg["rack"] = self.rack
        if self.unclean_shutdown and not self._registered_once:    # said once: later sessions are this process
            reg[zk_paths.UNCLEAN_SHUTDOWN_KEY] = True
        if self.kafka_advertise:
            from services.kafka_protocol.endpoints import registration_entry
            host, port = rpc.split_address(self.kafka_advertise)
            reg.update(registration_entry(host, port or self.kafka_listener.port))
        data = zk_paths.encode(reg)
        stat = zk_paths.register_ephemeral(
            self.zk, path, data, lambda: self._stopping, lambda: self.time.sleep(REGISTRATION_RETRY_BACKOFF_S),
            lambda: log.info("broker %d is still registered by an earlier session; waiting", self.broker_id))
        if stat is None:
            return
        self.broker_epoch = stat.czxid
        self._registered_once = True
        log.info("registered as broker %d (broker epoch %d%s)", self.broker_id, self.broker_epoch,
                 ", after an unclean shutdown" if zk_paths.UNCLEAN_SHUTDOWN_KEY in reg else "")

    def _on_controller(self, data, stat) -> None:
        d = zk_paths.decode(data) if data else None
        self.controller_address = f"{d['host']}:{d['port']}" if d and "host" in d else None

    def _on_txn_assignment(self, data, stat) -> None:
        d = zk_paths.decode(data) if data else None
        self.txn_assignment = {int(p): a for p, a in (d or {}).get("partitions", {}).items()}

    def find_coordinator(self, req) -> broker_pb2.FindCoordinatorResponse:
        resp = broker_pb2.FindCoordinatorResponse(error=E.COORDINATOR_NOT_AVAILABLE, node_id=-1, partition=-1,
                                                  coordinator_epoch=-1)
        if req.key_type == broker_pb2.TRANSACTION:
            with self.metadata.lock:
                n = len(self.metadata.partitions.get(it.TRANSACTION_STATE_TOPIC, {}))
            if not n:
                resp.error_message = "no __transaction_state topic yet"
                return resp
            resp.partition = it.partition_for(req.key, n)
            owner = self.txn_assignment.get(resp.partition)
            if owner is None or owner["coordinator"] < 0:      # unowned while its coordinator is down
                resp.error_message = f"__transaction_state-{resp.partition} has no coordinator"
                return resp
            resp.error, resp.node_id, resp.host, resp.port = E.NONE, owner["coordinator"], owner["host"], owner["port"]
            resp.coordinator_epoch = owner["epoch"]
            return resp
        n = self.group_coordinator.num_partitions()
        if not n:
            self._create_offsets_topic()
            resp.error_message = "creating __consumer_offsets"
            return resp
        resp.partition = it.partition_for(req.key, n)
        with self.metadata.lock:
            st = self.metadata.partitions.get(it.CONSUMER_OFFSETS_TOPIC, {}).get(resp.partition)
            leader = self.metadata.brokers.get(st.leader) if st is not None else None
        if leader is None:
            return resp
        resp.error, resp.node_id, resp.host, resp.port = E.NONE, leader.broker_id, leader.host, leader.port
        return resp

    def _create_offsets_topic(self) -> None:
        if self._creating_offsets_topic or self.controller_address is None:
            return
        self._creating_offsets_topic = True

        def run():
            from eoslab.v1 import controller_pb2_grpc
            try:
                with rpc.channel(self.controller_address) as ch:
                    controller_pb2_grpc.ControllerStub(ch).CreateTopics(broker_pb2.CreateTopicsRequest(topics=[
                        broker_pb2.CreatableTopic(name=it.CONSUMER_OFFSETS_TOPIC,
                                                  num_partitions=it.DEFAULT_OFFSETS_PARTITIONS,
                                                  configs=it.INTERNAL_TOPIC_CONFIGS)]), timeout=30)
            except Exception as e:  # noqa: BLE001 - the next FindCoordinator tries again
                log.info("creating %s failed: %r", it.CONSUMER_OFFSETS_TOPIC, e)
            finally:
                self._creating_offsets_topic = False
        threading.Thread(target=run, daemon=True).start()

    def verify_txn(self, transactional_id: str, pid: int, epoch: int, topic: str, partition: int,
                   add: bool = False) -> int:
        """KIP-890 part 1: ask the transaction coordinator whether the partition is in the transaction;
        with `add` (part 2, Produce v12 / TxnOffsetCommit v5) ask it to add the partition instead, as
        Kafka's AddPartitionsToTxnManager sets verifyOnly to !supportsEpochBump."""
        from eoslab.v1 import txn_pb2, txn_pb2_grpc
        if not transactional_id:
            return E.INVALID_TXN_STATE
        fc = self.find_coordinator(broker_pb2.FindCoordinatorRequest(key_type=broker_pb2.TRANSACTION,
                                                                    key=transactional_id))
        if fc.error != E.NONE:   # retriable for the producer (Kafka also answers NOT_ENOUGH_REPLICAS here)
            return E.NOT_ENOUGH_REPLICAS
        try:
            r = self.channels.stub(f"{fc.host}:{fc.port}", txn_pb2_grpc.TransactionCoordinatorStub).AddPartitionsToTxn(
                txn_pb2.AddPartitionsToTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                                  producer_epoch=epoch, verify_only=not add,
                                                  partitions=[common_pb2.TopicPartition(topic=topic,
                                                                                        partition=partition)]),
                timeout=5)
        except grpc.RpcError:
            return E.NOT_ENOUGH_REPLICAS
        if r.error in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.NOT_COORDINATOR):
            return E.NOT_ENOUGH_REPLICAS
        if r.error != E.NONE:
            return E.INVALID_TXN_STATE if r.error not in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH) else r.error
        for pr in r.partitions:
            if pr.error != E.NONE:
                return E.INVALID_TXN_STATE
        return E.NONE

    def alter_partition(self, partition, new_isr: list[int]) -> None:
        """Ask the active controller for an ISR change (KIP-497) and apply what it answers."""
        from eoslab.v1 import controller_pb2, controller_pb2_grpc
        addr = self.controller_address
        if addr is None:
            return
        req = controller_pb2.AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch, topic=partition.topic,
            partition=partition.partition, leader_epoch=partition.leader_epoch, new_isr=new_isr,
            partition_epoch=partition.partition_epoch)
        try:
            with rpc.channel(addr) as ch:
                r = controller_pb2_grpc.ControllerStub(ch).AlterPartition(req, timeout=5)
        except grpc.RpcError as e:      # the controller is out of reach: the ISR loop asks again next round
            log.info("%s-%d: ISR change to %s not sent: controller %s", partition.topic, partition.partition,
                     new_isr, e.code())
            return
        if r.error == E.NONE:
            log.info("%s-%d: isr %s -> %s", partition.topic, partition.partition, partition.isr, list(r.state.isr))
            partition.update_isr(list(r.state.isr), r.state.zk_version)
        else:
            log.info("%s-%d: ISR change to %s refused: %s", partition.topic, partition.partition, new_isr,
                     E.Name(r.error))
            self.time.sleep(ALTER_PARTITION_RETRY_BACKOFF_S)

    def producer_id_known(self, pid: int) -> bool:
        if pid <= self._max_issued_pid:
            return True
        try:
            data, _ = self.zk.get(zk_paths.LATEST_PRODUCER_ID_BLOCK)
            self._max_issued_pid = int(zk_paths.decode(data)["block_end"])
        except Exception:  # noqa: BLE001 - cannot tell: do not refuse a real producer
            return True
        return pid <= self._max_issued_pid

    def stop(self) -> None:
        self._stopping = True
        self.config_changes.close()
        if self.authorizer is not None:
            self.authorizer.close()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass
        if self.kafka_listener is not None:
            self.kafka_listener.stop()
        self.server.stop(1).wait()
        self.group_coordinator.shutdown()
        self.replica_manager.shutdown()
        try:
            write_broker_clean_shutdown(self.data_dir)
        except OSError:
            log.exception("the clean-shutdown marker was not written: the next start counts as unclean")
        self.channels.close_all()
