"""ReplicaManager: the partitions this broker hosts, and the Produce/Fetch paths (ListOffsets and
OffsetsForLeaderEpoch in offset_lookups.py, the long polls in delayed_fetch.py).

Guarantees: LeaderAndIsr from a controller with an older epoch than one
already seen is refused (STALE_CONTROLLER_EPOCH) and a partition state with an
older leader epoch than the replica's is ignored; every produce answer carries
Kafka's error code per partition; a malformed batch for one partition never
affects another partition or the broker. A fetch names a follower only if
that broker is a replica of the partition, and moves the follower's position
(and so the high watermark) only when the read succeeded (an offset beyond
the log end is OFFSET_OUT_OF_RANGE and changes nothing). A long poll waits at
most MAX_FETCH_WAIT_MS, ends at once when its caller goes away, is woken only
by its own partitions (a follower's when a log end moves, a consumer's when a
high watermark moves, both on a change of role), and at most
MAX_PARKED_CLIENT_FETCHES client fetches wait at a time (the others are
answered at once, empty), so long polls never take every server thread; an
acks=all produce waits at most MAX_PRODUCE_WAIT_MS for its replicas.
Markers with a producer id, producer epoch or coordinator epoch out of
Kafka's ranges are INVALID_REQUEST. Producer state is answered by any
replica, leader or follower (Kafka's activeProducerState), and
NOT_LEADER_OR_FOLLOWER only when the broker hosts no replica; KIP-664's
gauges (`transaction_metrics`) count leader partitions only, as Kafka's do. Every wait and interval here (long polls,
the ISR check every ISR_CHECK_S, the high-watermark checkpoint and
producer-expiry intervals) is on the `Time` the manager was given, which it
hands to its partitions and replica fetchers.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading

from eoslab.v1 import broker_pb2
from services.broker.log_cleaner import LogCleaner
from services.broker.metadata_cache import MetadataCache
from services.broker.checkpoints import HW_CHECKPOINT_INTERVAL_S
from services.broker.log_config import LogConfig
from services.broker.delayed_fetch import MAX_PARKED_CLIENT_FETCHES, DelayedFetchPurgatory  # noqa: F401 - re-exported
from services.broker.offset_lookups import OffsetLookups
from services.broker.partition import Partition
from services.broker.replica_fetcher import ReplicaFetcherManager
from services.broker.replica_selector import find_preferred_read_replica
from services.broker.transaction_metrics import TRANSACTION_MAX_TIMEOUT_MS, late_transactions
from eoslab.common.record_batch import MAX_PRODUCER_EPOCH
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)
# A fetch's wait is bounded by Kafka's request.timeout.ms default (30 s): a client waiting longer has
# already given the request up.
MAX_FETCH_WAIT_MS = 30000
MAX_PRODUCE_WAIT_MS = 30000         # an acks=all answer waits at most this (the same bound as a fetch)
ISR_CHECK_S = 0.2                   # how often leaders check their ISR (and the periodic tasks their intervals)


class ReplicaManager(DelayedFetchPurgatory, OffsetLookups):
    def __init__(self, broker_id: int, data_dir: str, defaults: LogConfig, metadata: MetadataCache,
                 producer_id_known=None, alter_partition=None, verify_txn=None, time: Time = SYSTEM,
                 replica_selector=None, log_cleaner: dict | None = None):
        self.time = time
        self.replica_selector = replica_selector    # KIP-392's replica.selector.class, or None (always the leader)
        self.broker_id = broker_id
        self.verify_txn = verify_txn   # KIP-890: (txn id, pid, epoch, topic, partition, add=False) -> error code
        self.alter_partition = alter_partition   # (partition, new_isr) -> None; asks the controller
        self.fetchers = ReplicaFetcherManager(broker_id, metadata.broker_address, time=time)
        self._stopping = threading.Event()
        self.data_dir = data_dir
        self.defaults = defaults
        self.metadata = metadata
        self.producer_id_known = producer_id_known
        self.lock = threading.Lock()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1
        self.on_marker = None   # (partition, producer id, committed) -> None: the group coordinator's hook
        self._init_fetch_purgatory()
        self._started = self.time.monotonic()  # the periodic tasks' intervals count from here
        self._isr_thread = threading.Thread(target=self._isr_loop, name="isr-maintenance", daemon=True)
        self._isr_thread.start()                 # last: the loop reads the attributes above
        # log.cleaner.enable: compacts every partition here of a topic with cleanup.policy=compact, leader
        # or follower, as each Kafka broker cleans its own logs ({backoff_ms, dedupe_buffer_size} or None)
        self.log_cleaner = None if log_cleaner is None else LogCleaner(
            self._all_partitions, time=time, name=f"log-cleaner-{broker_id}", **log_cleaner).start()

    def check_controller_epoch(self, epoch: int) -> bool:
        with self.lock:
            if epoch < self.controller_epoch:
                return False
            self.controller_epoch = epoch
            return True

    def _config_for(self, topic: str) -> LogConfig:
        cfg = LogConfig(**{k: v for k, v in vars(self.defaults).items()})
        tc = self.metadata.topic_configs(topic)
        if "max.message.bytes" in tc:
            cfg.max_message_bytes = int(tc["max.message.bytes"])
        if "segment.bytes" in tc:
            cfg.segment_bytes = int(tc["segment.bytes"])
        if "min.insync.replicas" in tc:
            cfg.min_insync_replicas = int(tc["min.insync.replicas"])
        return cfg.apply_topic_configs(tc)

    def update_topic_configs(self, topics: set[str]) -> None:
        """A topic's configs changed (AlterConfigs): its partitions here take the new log settings at
        once (Kafka's TopicConfigHandler -> UnifiedLog.updateConfig)."""
        with self.lock:
            parts = [p for (t, _), p in self.partitions.items() if t in topics]
        for p in parts:
            p.update_config(self._config_for(p.topic))

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def active_producer_state(self, topic: str, partition: int) -> tuple[int, list]:
        """(error, producer entries) of a partition on any replica here (Kafka's
        ReplicaManager.activeProducerState: a follower answers from its own producer state)."""
        p = self.partitions.get((topic, partition))
        if p is None:
            return (E.NOT_LEADER_OR_FOLLOWER if self.metadata.has_partition(topic, partition)
                    else E.UNKNOWN_TOPIC_OR_PARTITION), []
        with p.lock:
            return E.NONE, list(p.producer_state.producers.values())

    def transaction_metrics(self, max_timeout_ms: int = TRANSACTION_MAX_TIMEOUT_MS) -> tuple[int, int, str]:
        """KIP-664's gauges over the leader partitions (services.broker.transaction_metrics)."""
        with self.lock:
            leaders = [p for p in self.partitions.values() if p.is_leader]
        return late_transactions(leaders, self.time.milliseconds(), max_timeout_ms)

    def become_leader_or_follower(self, req: broker_pb2.LeaderAndIsrRequest) -> broker_pb2.LeaderAndIsrResponse:
        if not self.check_controller_epoch(req.controller_epoch):
            return broker_pb2.LeaderAndIsrResponse(error=E.STALE_CONTROLLER_EPOCH)
        resp = broker_pb2.LeaderAndIsrResponse(error=E.NONE)
        for s in req.partition_states:
            if self.broker_id not in s.replicas:
                continue
            key = (s.topic, s.partition)
            with self.lock:
                p = self.partitions.get(key)
                if p is None:
                    p = Partition(s.topic, s.partition, self.data_dir, self.broker_id,
                                  self._config_for(s.topic), self.producer_id_known, time=self.time)
                    p.on_change = self._partition_changed
                    p.verify_txn = self.verify_txn
                    self.partitions[key] = p
            if s.leader_epoch < p.leader_epoch:
                resp.partition_errors.add(topic=s.topic, partition=s.partition, error=E.STALE_CONTROLLER_EPOCH)
                continue
            if s.leader_epoch == p.leader_epoch and s.leader == p.leader_id:
                p.update_isr(list(s.isr), s.zk_version)
                continue
            if s.leader == self.broker_id:
                self.fetchers.remove(key)
                p.make_leader(s.leader_epoch, list(s.replicas), list(s.isr), s.zk_version)
                log.info("%s-%d: leader at epoch %d, log end %d, isr %s", s.topic, s.partition, s.leader_epoch,
                         p.log_end_offset, list(s.isr))
            else:
                p.make_follower(s.leader, s.leader_epoch, list(s.replicas), list(s.isr), s.zk_version)
                if s.leader >= 0:
                    self.fetchers.add(p, s.leader, s.leader_epoch)
                else:
                    self.fetchers.remove(key)
        return resp

    def stop_replicas(self, req: broker_pb2.StopReplicaRequest) -> broker_pb2.StopReplicaResponse:
        """Kafka's StopReplica: stop fetching and serving the partitions; with delete_partitions close
        their logs and remove their directories (a deleted topic). A partition this broker does not
        hold is deleted from disk all the same (a replica left behind while the broker was down)."""
        if not self.check_controller_epoch(req.controller_epoch):
            return broker_pb2.StopReplicaResponse(error=E.STALE_CONTROLLER_EPOCH)
        for tp in req.partitions:
            key = (tp.topic, tp.partition)
            self.fetchers.remove(key)
            with self.lock:
                p = self.partitions.pop(key, None)
            if p is not None:
                p.close(snapshot=not req.delete_partitions)
            if req.delete_partitions:
                shutil.rmtree(os.path.join(self.data_dir, f"{tp.topic}-{tp.partition}"), ignore_errors=True)
                log.info("%s-%d: replica stopped and deleted", tp.topic, tp.partition)
        return broker_pb2.StopReplicaResponse(error=E.NONE)

    # -- produce ----------------------------------------------------------------------------
    def append_records(self, req: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        resp = broker_pb2.ProduceResponse(correlation_id=req.correlation_id)
        waits = []
        for pd in req.partitions:
            out = resp.partitions.add(topic=pd.topic, partition=pd.partition, base_offset=-1)
            if req.acks not in (-1, 0, 1):
                out.error, out.error_message = E.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, got {req.acks}"
                continue
            p = self.partitions.get((pd.topic, pd.partition))
            if p is None:
                if self.metadata.has_partition(pd.topic, pd.partition):
                    out.error, out.error_message = E.NOT_LEADER_OR_FOLLOWER, "no replica here"
                else:
                    out.error = E.UNKNOWN_TOPIC_OR_PARTITION
                    out.error_message = f"unknown topic-partition {pd.topic}-{pd.partition}"
                continue
            if not pd.HasField("batch"):
                out.error, out.error_message = E.INVALID_REQUEST, "no record batch"
                continue
            try:
                r = p.append_records_to_leader(pd.batch, req.acks, req.transactional_id,
                                               add_to_txn=req.add_partitions_to_txn)
            except OSError as e:  # disk trouble: Kafka's storage error, the broker keeps serving
                log.error("%s-%d: append failed: %s", pd.topic, pd.partition, e)
                out.error, out.error_message = E.KAFKA_STORAGE_ERROR, str(e)
                continue
            out.error, out.base_offset, out.error_message = r.error, r.base_offset, r.message
            out.log_append_time = r.log_append_time
            for i, why in r.record_errors:
                out.record_errors.add(batch_index=i, message=why)
            out.log_start_offset = p.log.log_start_offset
            out.leader_epoch = p.leader_epoch
            if r.error == E.NONE and req.acks == -1:
                waits.append((out, p, r.last_offset, out.leader_epoch))
        timeout = min(req.timeout_ms if req.timeout_ms > 0 else 30000, MAX_PRODUCE_WAIT_MS) / 1000.0
        for out, p, last, epoch in waits:   # acks=all: answer once the ISR has it (Kafka's purgatory)
            err, msg = p.wait_for_replication(last, epoch, timeout)
            if err != E.NONE:
                out.error, out.error_message = err, msg
        return resp

    # -- transaction markers --------------------------------------------------------------------
    def write_txn_markers(self, req: broker_pb2.WriteTxnMarkersRequest) -> broker_pb2.WriteTxnMarkersResponse:
        """Append every marker, then answer once each is replicated to the ISR (markers are acks=all)."""
        resp = broker_pb2.WriteTxnMarkersResponse()
        waits = []
        for m in req.markers:
            mr = resp.markers.add(producer_id=m.producer_id)
            bad = (m.producer_id < 0 or not 0 <= m.producer_epoch <= MAX_PRODUCER_EPOCH or m.coordinator_epoch < 0)
            for tp in m.partitions:
                out = mr.partitions.add(topic=tp.topic, partition=tp.partition)
                if bad:
                    out.error = E.INVALID_REQUEST
                    out.error_message = (f"marker out of range: producer id {m.producer_id}, producer epoch "
                                         f"{m.producer_epoch} (0..{MAX_PRODUCER_EPOCH}), coordinator epoch "
                                         f"{m.coordinator_epoch}")
                    continue
                p = self.partitions.get((tp.topic, tp.partition))
                if p is None:
                    out.error = (E.NOT_LEADER_OR_FOLLOWER if self.metadata.has_partition(tp.topic, tp.partition)
                                 else E.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                try:
                    r = p.append_txn_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.committed)
                except OSError as e:
                    out.error, out.error_message = E.KAFKA_STORAGE_ERROR, str(e)
                    continue
                out.error, out.error_message = r.error, r.message
                if r.error == E.NONE:
                    waits.append((out, p, r.last_offset, p.leader_epoch, m))
        for out, p, last, epoch, m in waits:
            err, msg = p.wait_for_replication(last, epoch, 30.0)
            if err != E.NONE:
                out.error, out.error_message = err, msg
            elif self.on_marker is not None:
                self.on_marker(p, m.producer_id, m.committed)
        return resp

    # -- fetch ---------------------------------------------------------------------------------
    def fetch(self, req: broker_pb2.FetchRequest, cancelled: threading.Event | None = None
              ) -> broker_pb2.FetchResponse:
        """Long poll: answer at once when there is data, else when one of its partitions gets some,
        max_wait ends (at most MAX_FETCH_WAIT_MS), or the caller went away (`cancelled`)."""
        wait_s = min(max(0, req.max_wait_ms), MAX_FETCH_WAIT_MS) / 1000.0
        deadline = self.time.monotonic() + wait_s
        if wait_s <= 0 or not req.partitions or (cancelled is not None and cancelled.is_set()):
            return self._fetch_once(req)[0]
        w = self._park(req, cancelled)
        if w is None:                     # too many waiting: answer now, the client polls again
            return self._fetch_once(req)[0]
        try:
            timed_out = False
            while True:
                w.event.clear()
                resp, got = self._fetch_once(req)
                remaining = deadline - self.time.monotonic()
                if got or timed_out or remaining <= 0 or (cancelled is not None and cancelled.is_set()):
                    return resp
                timed_out = not self.time.wait_event(w.event, remaining)   # False: it ran to the deadline
        finally:
            self._unpark(w)

    def _fetch_once(self, req):
        resp = broker_pb2.FetchResponse()
        budget = req.max_bytes if req.max_bytes > 0 else 16 << 20
        got = 0
        min_one = True       # Kafka's ReplicaManager.readFromLog: only until a partition gives a batch
        for fp in req.partitions:
            out = resp.partitions.add(topic=fp.topic, partition=fp.partition, high_watermark=-1,
                                      last_stable_offset=-1, log_start_offset=-1)
            p = self.partitions.get((fp.topic, fp.partition))
            if p is None:
                out.error = (E.NOT_LEADER_OR_FOLLOWER if self.metadata.has_partition(fp.topic, fp.partition)
                             else E.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            # Kafka's FetchParams.fetchOnlyLeader: a consumer's fetch with client metadata (v11+) may be
            # served by a follower (KIP-392)
            if not p.is_leader and (req.replica_id >= 0 or not req.client_metadata):
                out.error = E.NOT_LEADER_OR_FOLLOWER
                continue
            err = p.check_leader_epoch(fp.current_leader_epoch)
            if err != E.NONE:
                out.error = err
                continue
            if req.client_metadata and req.replica_id < 0 and self.replica_selector is not None:
                preferred = find_preferred_read_replica(p, self.replica_selector, req.rack_id, fp.fetch_offset,
                                                        self.metadata.rack)
                if preferred is not None:        # Kafka skips the read: the client goes to that replica
                    out.preferred_read_replica = preferred
                    out.high_watermark, out.last_stable_offset = p.high_watermark, p.last_stable_offset
                    out.log_start_offset = p.log.log_start_offset
                    continue
            limit = fp.partition_max_bytes if fp.partition_max_bytes > 0 else 1 << 20
            if req.replica_id >= 0 and req.replica_id not in p.replicas:
                out.error = E.NOT_LEADER_OR_FOLLOWER      # Kafka: not one of the assigned replicas
                continue
            committed = req.isolation_level == broker_pb2.READ_COMMITTED and req.replica_id < 0
            err, batches = p.read(fp.fetch_offset, min(limit, max(budget, 0)), replica=req.replica_id >= 0,
                                  read_committed=committed, min_one=min_one)
            min_one = min_one and not batches
            if req.replica_id >= 0 and err == E.NONE:   # as Kafka: the follower's position moves after a good read
                p.record_follower_fetch(req.replica_id, fp.fetch_offset, fp.log_start_offset)
            out.error = err
            out.high_watermark = p.high_watermark
            out.last_stable_offset = p.last_stable_offset
            out.log_start_offset = p.log.log_start_offset
            if committed and batches:
                for a in p.aborted_transactions(fp.fetch_offset, batches[-1].last_offset + 1):
                    out.aborted_transactions.add(producer_id=a.producer_id, first_offset=a.first_offset)
            for b in batches:
                out.batches.append(b.to_proto())
                budget -= b.size_in_bytes
                got += 1
        return resp, got

    def _isr_loop(self) -> None:
        """Shrink the ISR of lagging followers and expand it with caught-up ones, through the controller;
        also, every so often, checkpoint high watermarks and forget expired producers on every partition."""
        periodic = [[HW_CHECKPOINT_INTERVAL_S, self._started, Partition.checkpoint_hw],
                    [self.defaults.producer_id_expiration_check_ms / 1000.0, self._started,
                     Partition.remove_expired_producers],
                    [self.defaults.flush_scheduler_interval_ms / 1000.0, self._started, Partition.flush_if_due],
                    [self.defaults.recovery_point_checkpoint_interval_ms / 1000.0, self._started,
                     Partition.checkpoint_recovery_point]]
        while not self.time.wait_event(self._stopping, ISR_CHECK_S):
            with self.lock:
                everyone = list(self.partitions.values())
            now = self.time.monotonic()
            for task in periodic:
                interval, last, fn = task
                if now - last >= interval:
                    task[1] = now
                    for p in everyone:
                        fn(p)
            parts = [p for p in everyone if p.is_leader]
            for p in parts:
                new = p.isr_change_wanted()
                if new is not None and self.alter_partition is not None:
                    p.isr_change_in_flight = True
                    try:
                        self.alter_partition(p, new)
                    except Exception:  # noqa: BLE001 - retried on the next round
                        log.exception("ISR change for %s-%d failed", p.topic, p.partition)
                    finally:
                        p.isr_change_in_flight = False

    def _all_partitions(self) -> list:
        with self.lock:
            return list(self.partitions.values())

    def shutdown(self) -> None:
        self._stopping.set()
        if self.log_cleaner is not None:
            self.log_cleaner.shutdown()       # before the logs close under it
        self.fetchers.shutdown()
        with self.lock:
            parts = list(self.partitions.values())
        for p in parts:
            p.close()

