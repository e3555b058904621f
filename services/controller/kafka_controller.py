"""KafkaController: election through ZooKeeper, broker liveness, partition leadership, topics.

Guarantees:
- at most one controller acts at a time: the active one holds the ephemeral
  /controller znode and a controller epoch it bumped with a versioned write;
  every partition-state write is a ZooKeeper transaction that also checks the
  epoch znode's version, so a stale controller's writes fail and it resigns;
- all state changes happen on one event thread (Kafka's ControllerEventManager),
  in order; a broker's death (its ephemeral znode gone, or re-created with a
  new epoch) moves leadership off it and bumps the leader epoch; one re-created
  with a new epoch is then a candidate again, as Kafka's onBrokerStartup
  follows onBrokerFailure for a bounced broker (unless it is back from an
  unclean shutdown, KIP-966);
- every live broker is eventually sent the current state (channel_manager);
- a topic request (create, delete, grow, configs) is answered, never raised: NOT_CONTROLLER for each
  item at a controller that is not active, REQUEST_TIMED_OUT for each item when the event thread did
  not get to it within `request_timeout_s`, as Kafka's controller answers a request that timed out;
- the brokers' dynamic cluster default (`/config/brokers/<default>`) is loaded at start and followed
  through `/config/changes`: its `unclean.leader.election.enable` and `min.insync.replicas` apply to
  every topic without its own value, and turning unclean election on elects the offline partitions at
  once (Kafka's UncleanLeaderElectionEnable);
- time is the injected `Time` (`self.time`, handed to the channel manager
  too): the /controller znode's timestamp is its wall clock, the retry of a
  failed event waits on it and ends at once on `stop()`.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from eoslab.v1 import broker_pb2, common_pb2, controller_pb2
from eoslab.common.topics import new_topic_id
from eoslab.common.time import SYSTEM, Time
from services.common import entity_configs, zk_paths
from services.common.change_notifications import ChangeNotificationListener, config_change_handler
from services.common.zk_client import zk_client
from services.controller import cluster_defaults
from services.controller import controller_events as ev
from services.controller.alter_partition import AlterPartitionHandler
from services.controller.partition_state_machine import PartitionStateMachine, StalePartitionState
from services.controller.channel_manager import ControllerChannelManager, update_metadata_request
from services.controller.context import BrokerInfo, ControllerContext, Fenced, LeaderIsr
from services.controller.producer_id_manager import ProducerIdManager
from services.controller.partition_creation import grow_topic
from services.controller.topic_config_change import alter_topic_configs
from services.controller.topic_deletion import delete_topic, load_owed_deletions, replicas_stopped
from services.controller.topic_creation import create_topic
from services.controller.txn_coordinator_assignment import reassign as reassign_txn_coordinators
from eoslab.common.errors import E

EVENT_RETRY_BACKOFF_S = 0.2    # a failed retryable event is put back after this pause
REQUEST_TIMEOUT_S = 30.0       # how long a request waits for the event thread before REQUEST_TIMED_OUT

log = logging.getLogger(__name__)


class KafkaController(AlterPartitionHandler, PartitionStateMachine):
    def __init__(self, controller_id: int, host: str, port: int, zk_connect: str,
                 session_timeout_ms: int = 2000, pid_block_size: int = 1000,
                 default_replication_factor: int = 3, time: Time = SYSTEM,
                 eligible_leader_replicas: bool = False, min_insync_replicas: int = 1):
        self.time = time
        self.elr_enabled = eligible_leader_replicas     # KIP-966 (eligible.leader.replicas.enable)
        self.default_min_isr = min_insync_replicas     # the cluster's min.insync.replicas
        self.request_timeout_s = REQUEST_TIMEOUT_S
        self.controller_id = controller_id
        self.host, self.port = host, port
        self.zk = zk_client(zk_connect, session_timeout_ms)
        self.ctx = ControllerContext()
        self.lock = threading.RLock()       # guards ctx, active, epoch
        # brokers gone (or bounced) and registered that a failed BrokerChange has not handled yet
        self._owed_gone: set[int] = set()
        self._owed_born: set[int] = set()
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.default_rf = default_replication_factor
        self.pid_manager = ProducerIdManager(self.zk, controller_id, pid_block_size)
        self.channels = ControllerChannelManager(self._build_requests, self._on_stale_epoch, time=time,
                                                 on_replicas_stopped=lambda b, parts: replicas_stopped(self, b, parts))
        self.events: queue.Queue = queue.Queue()
        self.config_changes = ChangeNotificationListener(
            self.zk, entity_configs.CHANGES, config_change_handler({"brokers": lambda name: cluster_defaults.broker_config_changed(self, name)}),
            name=f"controller-{controller_id}-config-changes", time=time)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._event_loop, name="controller-events", daemon=True)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.zk.add_listener(self._on_zk_state)
        zk_paths.connect(self.zk, (zk_paths.BROKER_IDS, zk_paths.TOPICS, zk_paths.TOPIC_CONFIGS, zk_paths.DELETE_TOPICS,
                                   zk_paths.CONTROLLERS, zk_paths.TXN_COORDINATORS,
                                   zk_paths.UNCLEAN_SHUTDOWN_HANDLED))
        zk_paths.retrying(self.zk)(self._register_self)
        self.config_changes.start()                     # before the load it covers
        zk_paths.retrying(self.zk)(cluster_defaults.broker_config_changed, self, cluster_defaults.CLUSTER_DEFAULT)
        self._thread.start()
        self.zk.DataWatch(zk_paths.CONTROLLER, self._on_controller_znode)
        self.zk.ChildrenWatch(zk_paths.BROKER_IDS, lambda _c: self.events.put(ev.BrokerChange()))
        self.zk.ChildrenWatch(zk_paths.TXN_COORDINATORS, lambda _c: self.events.put(ev.CoordinatorChange()))
        self.events.put(ev.Elect())

    def stop(self) -> None:
        self._stopping.set()
        self.config_changes.close()
        self.events.put(ev.ShutdownEventThread())
        self.channels.close()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass

    def _register_self(self) -> None:
        path = f"{zk_paths.CONTROLLERS}/{self.controller_id}"
        data = zk_paths.encode({"host": self.host, "port": self.port})
        try:
            self.zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            pass

    def _on_zk_state(self, state) -> None:
        if state == KazooState.LOST:
            self.events.put(ev.Resign("zookeeper session lost"))
        elif state == KazooState.CONNECTED:
            self.events.put(ev.Reconnected())

    def _on_controller_znode(self, data, stat) -> None:
        if data is None:
            self.events.put(ev.Elect())

    # -- event loop --------------------------------------------------------------------------
    def _event_loop(self) -> None:
        while not self._stopping.is_set():
            event = self.events.get()
            if isinstance(event, ev.ShutdownEventThread):
                return
            try:
                self.process(event)
            except Fenced:
                self._resign("fenced by a newer controller epoch")
            except Exception as e:  # noqa: BLE001 - the controller must survive a bad event
                if isinstance(e, StalePartitionState):     # an expected race, not a fault of the controller's
                    log.warning("controller event %s: stale partition state %s", event.name, e)
                else:
                    log.exception("controller event %s failed", event.name)
                if self.active and event.retry_on_failure:
                    self.time.wait_event(self._stopping, EVENT_RETRY_BACKOFF_S)
                    self.events.put(event)

    def process(self, event: ev.ControllerEvent) -> None:
        """One event, on the event thread (Kafka's KafkaController.process)."""
        if isinstance(event, ev.Elect):
            self._elect()
        elif isinstance(event, ev.Reconnected):
            self._register_self()
            self._elect()
        elif isinstance(event, ev.Resign):
            self._resign(event.reason)
        elif isinstance(event, ev.BrokerChange):
            if self.active:
                self._on_broker_change()
        elif isinstance(event, ev.CoordinatorChange):
            reassign_txn_coordinators(self)
        elif isinstance(event, ev.ClusterDefaultsChange):
            cluster_defaults.apply(self, dict(event.config))
        elif isinstance(event, ev.Call):
            if event.future.set_running_or_notify_cancel():
                try:
                    event.future.set_result(event.fn())
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    event.future.set_exception(e)
        else:
            raise TypeError(f"unknown controller event {event!r}")

    def call(self, fn, timeout: float | None = None):
        """Run fn on the event thread and return its result (TimeoutError after `request_timeout_s`)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.events.put(ev.Call(fn, fut))
        return fut.result(self.request_timeout_s if timeout is None else timeout)

    def _answer(self, fn, refused):
        """fn()'s answer from the event thread, else refused(error, message) for every item."""
        if not self.active:
            return refused(E.NOT_CONTROLLER, "this controller is not active")
        try:
            return self.call(fn)
        except TimeoutError:
            log.warning("a request waited %.0f s for the controller's event thread: REQUEST_TIMED_OUT",
                        self.request_timeout_s)
            return refused(E.REQUEST_TIMED_OUT, "the controller did not get to the request in time")

    # -- election ---------------------------------------------------------------------------
    def _elect(self) -> None:
        if self.active or self._stopping.is_set():
            return
        data = zk_paths.encode({"version": 1, "brokerid": self.controller_id, "host": self.host,
                                "port": self.port, "timestamp": str(self.time.milliseconds())})
        try:
            self.zk.create(zk_paths.CONTROLLER, data, ephemeral=True)
        except NodeExistsError:
            if self._controller_znode_is_ours():     # left by a failover of ours that did not complete
                self._delete_controller_znode()       # its deletion fires the watch: a new election
            return  # someone else is active; the DataWatch tells us when that ends
        self.epoch, self.epoch_zk_version = self._bump_controller_epoch()
        log.info("controller %d is active with controller epoch %d", self.controller_id, self.epoch)
        with self.lock:
            self.active = True
        try:
            self._on_become_active()
        except Fenced:
            raise
        except Exception:  # noqa: BLE001 - Kafka's elect(): a failover that fails triggers a controller move
            log.exception("controller %d could not take over (its view of the cluster is incomplete); "
                          "resigning so that a new election loads it again", self.controller_id)
            self._resign("the failover did not complete")

    def _bump_controller_epoch(self) -> tuple[int, int]:
        while True:
            try:
                data, stat = self.zk.get(zk_paths.CONTROLLER_EPOCH)
                epoch = int(data.decode() or 0) + 1
                stat = self.zk.set(zk_paths.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch, stat.version
            except NoNodeError:
                try:
                    self.zk.create(zk_paths.CONTROLLER_EPOCH, b"1")
                    return 1, 0
                except NodeExistsError:
                    continue
            except BadVersionError:
                continue

    def _resign(self, why: str) -> None:
        with self.lock:
            if not self.active:
                return
            log.warning("controller %d resigns: %s", self.controller_id, why)
            self.active = False
            self.ctx.clear()
        self.channels.close()
        self._delete_controller_znode()

    def _controller_znode_is_ours(self) -> bool:
        try:
            data, _ = self.zk.get(zk_paths.CONTROLLER)
            return zk_paths.decode(data).get("brokerid") == self.controller_id
        except Exception:  # noqa: BLE001 - gone, or ZooKeeper out of reach: not known to be ours
            return False

    def _delete_controller_znode(self) -> None:
        """Delete /controller if it names this controller (a resignation); its watchers then elect."""
        try:
            if self._controller_znode_is_ours():
                self.zk.delete(zk_paths.CONTROLLER)
        except Exception:  # noqa: BLE001 - the znode may be gone with the session
            pass

    def _on_stale_epoch(self) -> None:
        self.events.put(ev.Resign("a broker has seen a newer controller epoch"))

    def _on_become_active(self) -> None:
        with self.lock:
            self._owed_gone, self._owed_born = set(), set()     # a failover loads everything afresh
            self.ctx.clear()
            self._load_brokers()
            for topic in self.zk.get_children(zk_paths.TOPICS):
                self._load_topic(topic)
            load_owed_deletions(self)
        owed = self._unclean_shutdowns_owed()      # registered while no controller was active to take them
        if owed:
            self._elect_offline_partitions(set(owed))
            log.info("brokers back from an unclean shutdown, not yet taken out of the ISRs: %s", sorted(owed))
            self._remove_unclean(owed)
        self.state_changed()
        reassign_txn_coordinators(self)

    def _load_brokers(self) -> dict[int, BrokerInfo]:
        live = {}
        for child in self.zk.get_children(zk_paths.BROKER_IDS):
            try:
                data, stat = self.zk.get(zk_paths.broker_path(int(child)))
            except NoNodeError:
                continue
            d = zk_paths.decode(data)
            live[int(child)] = BrokerInfo(int(child), d["host"], int(d["port"]), stat.czxid,
                                          bool(d.get(zk_paths.UNCLEAN_SHUTDOWN_KEY)), d.get("rack"))
        self.ctx.brokers = live
        return live

    def _load_topic(self, topic: str) -> None:
        data, _ = self.zk.get(zk_paths.topic_path(topic))
        d = zk_paths.decode(data)
        self.ctx.assignments[topic] = {int(p): r for p, r in d["partitions"].items()}
        self.ctx.topic_ids[topic] = d.get("topic_id") or self._give_topic_id(topic, self.ctx.assignments[topic])
        try:
            cdata, _ = self.zk.get(zk_paths.topic_config_path(topic))
            self.ctx.configs[topic] = zk_paths.decode(cdata).get("config", {})
        except NoNodeError:
            self.ctx.configs[topic] = {}
        for p in self.ctx.assignments[topic]:
            sdata, stat = self.zk.get(zk_paths.partition_state_path(topic, p))
            s = zk_paths.decode(sdata)
            self.ctx.states[(topic, p)] = LeaderIsr.from_json(s, stat.version)

    def _give_topic_id(self, topic: str, assignment: dict[int, list[int]]) -> str:
        """A topic written without an id (before ids were kept) gets one, as Kafka 2.8+'s controller
        adds ids to the topics it finds without (fenced by the controller epoch)."""
        topic_id = new_topic_id()
        tx = self.zk.transaction()
        tx.check(zk_paths.CONTROLLER_EPOCH, self.epoch_zk_version)
        tx.set_data(zk_paths.topic_path(topic), zk_paths.encode_topic(assignment, topic_id))
        if any(isinstance(r, Exception) for r in tx.commit()):
            raise Fenced()
        return topic_id

    # -- broker liveness ---------------------------------------------------------------------
    def _on_broker_change(self) -> None:
        with self.lock:
            old = dict(self.ctx.brokers)
            new = self._load_brokers()
        # what a failed run of this event saw stays owed: the retry reads ctx.brokers already updated,
        # and would see no change for a broker that went, or went and came back
        self._owed_gone |= {b for b in old if b not in new or new[b].epoch != old[b].epoch}
        self._owed_born |= {b for b in new if b not in old or new[b].epoch != old[b].epoch}
        gone, born = set(self._owed_gone), set(self._owed_born)
        if gone:
            log.info("brokers gone: %s", sorted(gone))
        if born:
            log.info("brokers registered: %s", sorted(born))
        unclean = self._unclean_shutdowns_owed()       # this registration's, or one a failed event left owed
        self._elect_offline_partitions(gone | unclean)   # not a candidate before it leaves the ISRs and ELRs
        if unclean:
            log.info("brokers back from an unclean shutdown: %s", sorted(unclean))
            self._remove_unclean(unclean)
        elif gone & born:
            # a broker that went and came back within one change (a new broker epoch): its failure took
            # its leaderships, its startup may win them back, as Kafka's processBrokerChange runs
            # onBrokerFailure then onBrokerStartup (an online-partition election) for bounced brokers
            self._elect_offline_partitions(set())
        self._owed_gone -= gone
        self._owed_born -= born
        self._sync_channels()

    def state_changed(self) -> None:
        """After a change of topics, assignments or configs: elect leaders for partitions without one
        (live brokers only, unclean where a topic allows it) and send every broker the new state."""
        self._elect_offline_partitions(set())
        self._sync_channels()

    def _sync_channels(self) -> None:
        with self.lock:
            brokers = {b.broker_id: b.address for b in self.ctx.brokers.values()}
        self.channels.set_brokers(brokers)
        self.channels.send_all()

    def _build_requests(self, broker_id: int):
        with self.lock:
            if not self.active:
                return None
            states = [broker_pb2.PartitionState(
                topic=t, partition=p, leader=s.leader, leader_epoch=s.leader_epoch, isr=s.isr,
                replicas=self.ctx.replicas(t, p), zk_version=s.zk_version, controller_epoch=s.controller_epoch)
                for (t, p), s in self.ctx.states.items()]
            brokers = [common_pb2.BrokerEndpoint(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack or "")
                       for b in self.ctx.brokers.values()]
            me = common_pb2.BrokerEndpoint(broker_id=self.controller_id, host=self.host, port=self.port)
            um = update_metadata_request(self.controller_id, self.epoch, states, brokers, me,
                                         dict(self.ctx.configs), dict(self.ctx.topic_ids))
            known = self.ctx.brokers.get(broker_id)
            um.broker_epoch = known.epoch if known is not None else -1
            mine = [s for s in states if broker_id in s.replicas]
            lai = broker_pb2.LeaderAndIsrRequest(controller_id=self.controller_id, controller_epoch=self.epoch,
                                                 partition_states=mine, live_leaders=brokers,
                                                 broker_epoch=um.broker_epoch)
            owed = sorted(self.ctx.deleting.get(broker_id, ()))
            stop = broker_pb2.StopReplicaRequest(
                controller_id=self.controller_id, controller_epoch=self.epoch, delete_partitions=True,
                broker_epoch=um.broker_epoch, partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in owed]) if owed else None
            return um, lai, stop

    # -- requests -------------------------------------------------------------------------
    def create_topics(self, request: broker_pb2.CreateTopicsRequest) -> broker_pb2.CreateTopicsResponse:
        return self._answer(
            lambda: broker_pb2.CreateTopicsResponse(topics=[create_topic(self, t, request.validate_only)
                                                         for t in request.topics]),
            lambda err, msg: broker_pb2.CreateTopicsResponse(topics=[
                broker_pb2.CreateTopicResult(name=t.name, error=err, error_message=msg) for t in request.topics]))

    def delete_topics(self, request) -> controller_pb2.DeleteTopicsResponse:
        return self._answer(
            lambda: controller_pb2.DeleteTopicsResponse(results=[delete_topic(self, n) for n in request.names]),
            lambda err, msg: controller_pb2.DeleteTopicsResponse(results=[
                controller_pb2.DeleteTopicResult(name=n, error=err, error_message=msg) for n in request.names]))

    def create_partitions(self, request) -> controller_pb2.CreatePartitionsResponse:
        return self._answer(
            lambda: controller_pb2.CreatePartitionsResponse(
                results=[grow_topic(self, t, request.validate_only) for t in request.topics]),
            lambda err, msg: controller_pb2.CreatePartitionsResponse(results=[
                controller_pb2.CreatePartitionsResult(name=t.name, error=err, error_message=msg)
                for t in request.topics]))

    def alter_topic_configs(self, request) -> controller_pb2.AlterTopicConfigsResponse:
        return self._answer(
            lambda: controller_pb2.AlterTopicConfigsResponse(
                results=[alter_topic_configs(self, t, request.validate_only) for t in request.topics]),
            lambda err, msg: controller_pb2.AlterTopicConfigsResponse(results=[
                controller_pb2.AlterTopicConfigResult(topic=t.topic, error=err, error_message=msg)
                for t in request.topics]))

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int):
        with self.lock:
            if not self.active:
                return E.NOT_CONTROLLER, None
            known = self.ctx.brokers.get(broker_id)
        if known is not None and 0 <= broker_epoch < known.epoch:
            return E.STALE_BROKER_EPOCH, None
        return E.NONE, self.pid_manager.generate_block(broker_id)
