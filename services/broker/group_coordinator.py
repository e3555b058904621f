"""GroupCoordinator (in every broker): consumer groups and their offsets in __consumer_offsets.

Guarantees:
- a group is served by the leader of its __consumer_offsets partition
  (internal_topics.partition_for); any other broker answers NOT_COORDINATOR;
  a new leader rebuilds the partition's offsets from its log before serving
  (COORDINATOR_LOAD_IN_PROGRESS never leaks stale offsets);
- an OffsetCommit is acknowledged only after its record is replicated to the
  ISR; a TxnOffsetCommit is appended as a transactional batch with the
  producer's id and epoch (an older epoch is INVALID_PRODUCER_EPOCH) and
  becomes visible only when the COMMIT marker for that producer lands on the
  partition; an ABORT drops it; OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for a partition with such a pending commit (KIP-447);
  one without require_stable gets the last committed offset, and each such
  partition answered is counted per group with the fetch's client id
  (`unstable_fetches`, read by the GroupMetrics RPC): a client that does not
  ask for stable offsets may re-process what another instance's open
  transaction is committing past;
- a committed partition's metadata longer than offset.metadata.max.bytes (OFFSET_METADATA_MAX_BYTES,
  counted in UTF-16 units as Java's String.length) is that partition's OFFSET_METADATA_TOO_LARGE and
  is not written, the commit's other partitions are, in OffsetCommit and TxnOffsetCommit alike (Kafka's
  GroupMetadataManager.validateOffsetMetadataLength, OffsetMetadataManager.isMetadataInvalid);
- membership (membership.py) checks commits as Kafka's validateOffsetCommit:
  generation -1 to an empty group is a standalone commit; otherwise the
  member and generation must be current (UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION), a memberless commit to a group with members is
  UNKNOWN_MEMBER_ID, and CompletingRebalance answers REBALANCE_IN_PROGRESS;
  TxnOffsetCommit checks member and generation from KIP-447 (2.5) on;
- from 3.7 (KAFKA-15449, GroupCoordinator.handleTxnCommitOffsets ->
  maybeStartTransactionVerificationForPartition), with
  transaction.partition.verification.enable, a TxnOffsetCommit whose
  producer has no open transaction on the group's offsets partition is
  verified with the transaction coordinator first: the offsets partition must
  be in the producer's ongoing transaction (else INVALID_TXN_STATE, and
  nothing is written), and a marker that lands between the verification and
  the append voids it (the verification guard), so a late commit of a
  finished transaction can never move the group's offset back; at
  TxnOffsetCommit v5 (KIP-890 part 2, transaction.version 2) the coordinator
  is asked to add the offsets partition instead, whatever that setting;

- group metadata (generation, leader, members, assignments) is stored in the
  group's __consumer_offsets partition when the leader's SyncGroup makes a
  generation Stable and when a member leaves; a broker that becomes leader
  of the partition loads it, so a coordinator move keeps the generation
  (no split: a new coordinator never starts the group again at generation 1
  while the old members still commit).
- a consumer-protocol group (KIP-848, ConsumerGroupHeartbeat) lives in consumer_groups
  (consumer_group_manager.py): its commits are checked by member epoch (ConsumerGroup.
  validate_offset_commit; a TxnOffsetCommit's stale epoch is ILLEGAL_GENERATION as in Kafka's
  OffsetMetadataManager), a classic JoinGroup to one with members is INCONSISTENT_GROUP_PROTOCOL and
  to an empty one replaces it (its tombstone written first); every change of it is stored in its
  offsets partition (acks=all) before the heartbeat is answered, and one not stored is undone and
  answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (Kafka's CoordinatorRuntime); a broker that
  becomes leader of the partition loads it, so its members keep their epochs and assignments, the group
  its epoch and target assignment (their next heartbeats and commits at their epochs pass);
- time: membership and its session-expiry loop (every EXPIRY_CHECK_S) run
  on the `Time` the coordinator was given.

Records in __consumer_offsets: their encoding and their replay are offsets_partition_state.py's.
"""
from __future__ import annotations

import json
import logging
import threading

from eoslab.v1 import broker_pb2
from services.broker import consumer_group_manager
from services.broker.consumer_group_member import STALE_MEMBER_EPOCH, GroupError
from services.broker.membership import GroupMembership
from services.broker.offsets_partition_state import (
    OffsetsPartitionState, _consumer_group_key, _key, _meta_key, _value)
from services.common.internal_topics import CONSUMER_OFFSETS_TOPIC, partition_for
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)
EXPIRY_CHECK_S = 0.1     # how often members' session timeouts are checked
OFFSET_METADATA_MAX_BYTES = 4096      # offset.metadata.max.bytes, Kafka's default
# GroupMetadataManager.maybeConvertOffsetCommitError: a verification's error as a TxnOffsetCommit answers it
VERIFICATION_ERRORS = {E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
                       E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
                       E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR}
# GroupCoordinatorService.handleOperationException: a failed write of a group's records as its request answers it
STORE_ERRORS = {E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
                E.NOT_COORDINATOR: E.NOT_COORDINATOR}


def offset_metadata_too_large(metadata: str | None) -> bool:
    """Kafka's check on a commit's metadata: Java's String.length (UTF-16 units) above the limit."""
    return metadata is not None and len(metadata.encode("utf-16-le")) // 2 > OFFSET_METADATA_MAX_BYTES


def _commit_answer(partitions, err: int) -> list:
    """Each committed partition's result: OFFSET_METADATA_TOO_LARGE for one whose metadata was too long
    (unless the whole commit failed before), else the commit's error."""
    return [broker_pb2.OffsetCommitPartitionResult(
        topic=o.topic, partition=o.partition,
        error=E.OFFSET_METADATA_TOO_LARGE if err == E.NONE and offset_metadata_too_large(o.metadata) else err)
        for o in partitions]


def store_error(err: int) -> int:
    """A failed write's error as the group request answers it (COORDINATOR_NOT_AVAILABLE by default)."""
    return STORE_ERRORS.get(err, E.COORDINATOR_NOT_AVAILABLE)


class GroupCoordinator:
    def __init__(self, replica_manager, metadata, txn_offset_commit_member_check: bool = True,
                 time: Time = SYSTEM, txn_offset_commit_verification: bool = False,
                 consumer_groups: dict | None = None):
        self.time = time
        self.rm = replica_manager
        self.txn_offset_commit_member_check = txn_offset_commit_member_check
        self.txn_offset_commit_verification = txn_offset_commit_verification   # KAFKA-15449 (3.7)
        self.metadata = metadata
        self.lock = threading.RLock()
        self.states: dict[int, OffsetsPartitionState] = {}
        self.membership = GroupMembership(time=time)
        # KIP-848 groups; `consumer_groups`: the broker's group.consumer.* settings (session_timeout_ms, ...)
        self.consumer_groups = consumer_group_manager.beside(self.membership, metadata, time,
                                                             store=self._store_consumer_group,
                                                             **(consumer_groups or {}))
        # group -> [partitions fetched without require_stable while pending, last such fetch's client id]
        self.unstable_fetches: dict[str, list] = {}
        replica_manager.on_marker = self._on_marker
        self._stopping = threading.Event()
        threading.Thread(target=self._expiry_loop, name="group-expiry", daemon=True).start()

    def _expiry_loop(self) -> None:
        while not self.time.wait_event(self._stopping, EXPIRY_CHECK_S):
            try:
                self.membership.expire()
                self.consumer_groups.expire()
            except Exception:  # noqa: BLE001 - keep expiring
                log.exception("group expiry failed")

    def shutdown(self) -> None:
        self._stopping.set()

    def owns(self, group: str) -> int:
        return self._state(group)[0]

    # -- ownership -------------------------------------------------------------------------
    def num_partitions(self) -> int:
        with self.metadata.lock:
            return len(self.metadata.partitions.get(CONSUMER_OFFSETS_TOPIC, {}))

    def partition_for(self, group: str) -> int:
        n = self.num_partitions()
        return partition_for(group, n) if n else -1

    def _state(self, group: str):
        """(error, partition, loaded state) for the group's offsets partition on this broker."""
        return self._partition_state(self.partition_for(group))

    def partition_state(self, group: str):
        """(error, offsets partition, its loaded state) for the group here (NOT_COORDINATOR elsewhere)."""
        return self._state(group)

    def led_partition_states(self) -> dict[int, OffsetsPartitionState]:
        """Partition -> loaded state, for every offsets partition this broker leads (loading those not yet)."""
        out = {}
        for n in range(self.num_partitions()):
            err, _, st = self._partition_state(n)
            if err == E.NONE:
                out[n] = st
        return out

    def _partition_state(self, n: int):
        p = self.rm.get_partition(CONSUMER_OFFSETS_TOPIC, n) if n >= 0 else None
        if p is None or not p.is_leader:
            return E.NOT_COORDINATOR, None, None
        with self.lock:
            st = self.states.get(n)
            if st is None or st.leader_epoch != p.leader_epoch:
                st = OffsetsPartitionState(p.leader_epoch)
                with p.lock:
                    for b in p.log.batches(p.log.log_start_offset):
                        st.apply_batch(b)
                self.states[n] = st
                self._load_groups(n, st)
                log.info("loaded offsets partition %d at leader epoch %d (%d groups)", n, p.leader_epoch,
                         len(st.groups))
            return E.NONE, p, st

    def _load_groups(self, n: int, st: OffsetsPartitionState) -> None:
        """This broker now leads offsets partition n: its groups are the stored ones (what it remembered
        of them from an earlier time as their coordinator is stale)."""
        with self.membership.cond:
            known = [g for g in self.membership.groups if self.partition_for(g) == n]
        for g in set(known) | set(st.groups):
            self.membership.load(g, st.groups.get(g))
        with self.consumer_groups.lock:      # a shard lock is never taken holding the tables' lock
            known = [g for g in self.consumer_groups.groups if self.partition_for(g) == n]
        for g in set(known) | set(st.consumer_groups):
            self.consumer_groups.load(g, st.consumer_groups.get(g))

    def _store_group(self, group: str) -> None:
        """Write the group's metadata to its offsets partition (acks=all), as Kafka's storeGroup."""
        err, p, st = self._state(group)
        meta = self.membership.snapshot(group)
        if err != E.NONE or meta is None:
            return
        err = self._append(p, [(_meta_key(group), json.dumps(meta, separators=(",", ":")).encode(), 0)])
        if err == E.NONE:
            with self.lock:
                st.stored_group(group, meta, consumer=False)
        else:
            log.warning("group %s: metadata not stored (%s)", group, E.Name(err))

    def _store_consumer_group(self, group: str, stored: dict | None) -> int:
        """Write a consumer group's record (None: its tombstone) to its offsets partition (acks=all), as
        Kafka's GroupMetadataManager records; the error its heartbeat answers when that fails. Called
        holding the group's shard lock: the partition state is read without self.lock (taken before the
        shard locks when a partition is loaded), and one not loaded at this leader epoch is NOT_COORDINATOR."""
        n = self.partition_for(group)
        if n < 0:
            return E.NONE      # no __consumer_offsets at all (a coordinator without a cluster: unit tests)
        p = self.rm.get_partition(CONSUMER_OFFSETS_TOPIC, n)
        st = self.states.get(n)
        if p is None or not p.is_leader or st is None or st.leader_epoch != p.leader_epoch:
            return E.NOT_COORDINATOR
        value = None if stored is None else json.dumps(stored, separators=(",", ":")).encode()
        err = self._append(p, [(_consumer_group_key(group), value, 0)])
        if err != E.NONE:
            log.warning("consumer group %s: not stored (%s)", group, E.Name(err))
            return store_error(err)
        st.stored_group(group, stored, consumer=True)
        return E.NONE

    # -- membership, stored ---------------------------------------------------------------------
    def join(self, req, client_id: str | None = None) -> broker_pb2.JoinGroupResponse:
        """`client_id`: the Kafka request header's, which a new member's id starts with (as Kafka's)."""
        err = self.owns(req.group_id)
        if err != E.NONE:
            return broker_pb2.JoinGroupResponse(error=err, generation_id=-1)
        with self.consumer_groups.shard_lock(req.group_id):
            modern = self.consumer_groups.group(req.group_id)
            if modern is not None and not modern.is_empty():     # Kafka: no common protocol with a consumer group
                return broker_pb2.JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL, generation_id=-1)
            err = self.consumer_groups.delete_group(req.group_id) if modern is not None else E.NONE
            if err != E.NONE:
                return broker_pb2.JoinGroupResponse(error=err, generation_id=-1)
        r = self.membership.join(req, client_id)
        if r.error == E.NONE and req.group_instance_id:   # a static member's new id is stored at once
            self._store_group(req.group_id)
        return r

    def sync(self, req) -> broker_pb2.SyncGroupResponse:
        err = self.owns(req.group_id)
        if err != E.NONE:
            return broker_pb2.SyncGroupResponse(error=err)
        r = self.membership.sync(req)
        if r.error == E.NONE and (req.assignments or req.assignment_bytes):         # the leader's sync made the generation Stable
            self._store_group(req.group_id)
        return r

    def heartbeat(self, req) -> broker_pb2.HeartbeatResponse:
        err = self.owns(req.group_id)
        if err != E.NONE:
            return broker_pb2.HeartbeatResponse(error=err)
        return self.membership.heartbeat(req)

    def leave(self, req) -> broker_pb2.LeaveGroupResponse:
        err = self.owns(req.group_id)
        if err != E.NONE:
            return broker_pb2.LeaveGroupResponse(error=err)
        r = self.membership.leave(req)
        if r.error == E.NONE:
            self._store_group(req.group_id)
        return r

    def _on_marker(self, partition, producer_id: int, committed: bool) -> None:
        if partition.topic != CONSUMER_OFFSETS_TOPIC:
            return
        with self.lock:
            st = self.states.get(partition.partition)
            if st is not None and st.leader_epoch == partition.leader_epoch:
                st.complete(producer_id, committed)

    # -- commits -----------------------------------------------------------------------------
    def _check_member(self, group: str, generation: int, member_id: str, transactional: bool = False,
                      instance: str = "", api_version: int = 9) -> int:
        with self.consumer_groups.lock:
            modern = self.consumer_groups.group(group)
            if modern is not None:
                try:
                    modern.validate_offset_commit(member_id, generation, transactional, api_version)
                except GroupError as e:
                    return E.ILLEGAL_GENERATION if transactional and e.code == STALE_MEMBER_EPOCH else e.code
                return E.NONE
        if generation >= 0 and api_version >= 9 and not transactional and self.membership.groups.get(group) is None:
            return E.GROUP_ID_NOT_FOUND       # OffsetCommit v9+ (KIP-848): ILLEGAL_GENERATION below
        if transactional and not self.txn_offset_commit_member_check:
            return E.NONE          # before KIP-447 (2.5) TxnOffsetCommit carries no member or generation
        return self.membership.check_commit(group, generation, member_id, transactional, instance)

    def _verify_txn_commit(self, p, req) -> tuple[int, object | None]:
        """KAFKA-15449: (error, verification guard) for a TxnOffsetCommit. A producer with an open
        transaction of this epoch on the offsets partition needs none (UnifiedLog.hasOngoingTransaction);
        otherwise the coordinator must have the partition in the producer's ongoing transaction, or, at
        TxnOffsetCommit v5 (KIP-890 part 2), add it there."""
        with p.lock:
            entry = p.producer_state.last_entry(req.producer_id)
            if entry is not None and entry.current_txn_first_offset is not None and \
                    entry.producer_epoch == req.producer_epoch:
                return E.NONE, None
            guard = p.producer_state.verification_guard(req.producer_id)
        err = p.verify_txn(req.transactional_id, req.producer_id, req.producer_epoch, CONSUMER_OFFSETS_TOPIC,
                           p.partition, add=req.add_partition_to_txn)
        return VERIFICATION_ERRORS.get(err, err), guard

    def _append(self, p, records, pid=-1, epoch=-1, transactional=False, guard=None) -> int:
        with p.lock:
            if guard is not None and not p.producer_state.verification_still_valid(pid, guard):
                entry = p.producer_state.last_entry(pid)
                if entry is None or entry.current_txn_first_offset is None:
                    return E.INVALID_TXN_STATE      # the transaction ended between verification and append
            r = p.append_internal(records, pid, epoch, transactional)
        if r.error != E.NONE:
            return r.error
        err, _ = p.wait_for_replication(r.last_offset, p.leader_epoch, 30.0)
        return err

    def offset_commit(self, req, leader_epochs: dict | None = None,
                      api_version: int = 9) -> broker_pb2.OffsetCommitResponse:
        """`leader_epochs`: (topic, partition) -> the commit's committed_leader_epoch (Kafka's wire carries
        it; the lab's gRPC request does not); `api_version`: the Kafka OffsetCommit's."""
        epochs = leader_epochs or {}
        err, p, st = self._state(req.group_id)
        if err == E.NONE:
            err = self._check_member(req.group_id, req.generation_id, req.member_id,
                                     instance=req.group_instance_id, api_version=api_version)
        if err == E.NONE:
            kept = [o for o in req.partitions if not offset_metadata_too_large(o.metadata)]
            records = [(_key(req.group_id, o.topic, o.partition),
                        _value(o.offset, o.metadata, epochs.get((o.topic, o.partition), -1)), 0)
                       for o in kept]
            err = self._append(p, records) if records else E.NONE
            if err == E.NONE:
                with self.lock:
                    for o in kept:
                        st.offsets.setdefault(req.group_id, {})[(o.topic, o.partition)] = (
                            o.offset, o.metadata, epochs.get((o.topic, o.partition), -1))
        return broker_pb2.OffsetCommitResponse(error=err, partitions=_commit_answer(req.partitions, err))

    def txn_offset_commit(self, req, leader_epochs: dict | None = None) -> broker_pb2.TxnOffsetCommitResponse:
        epochs = leader_epochs or {}
        err, p, st = self._state(req.group_id)
        guard = None      # Kafka's order: the verification first, then the group's member checks
        if err == E.NONE and req.partitions and p.verify_txn is not None and \
                (req.add_partition_to_txn or self.txn_offset_commit_verification):
            err, guard = self._verify_txn_commit(p, req)
        if err == E.NONE:
            err = self._check_member(req.group_id, req.generation_id, req.member_id, transactional=True,
                                     instance=req.group_instance_id)
        if err == E.NONE:
            kept = [o for o in req.partitions if not offset_metadata_too_large(o.metadata)]
            records = [(_key(req.group_id, o.topic, o.partition),
                        _value(o.offset, o.metadata, epochs.get((o.topic, o.partition), -1)), 0)
                       for o in kept]
            err = self._append(p, records, req.producer_id, req.producer_epoch, True, guard) if records \
                else E.NONE
            if err == E.NONE:
                with self.lock:
                    pend = st.pending.setdefault(req.producer_id, {}).setdefault(req.group_id, {})
                    for o in kept:
                        pend[(o.topic, o.partition)] = (o.offset, o.metadata,
                                                        epochs.get((o.topic, o.partition), -1))
        return broker_pb2.TxnOffsetCommitResponse(error=err, partitions=_commit_answer(req.partitions, err))

    def offset_fetch(self, req, leader_epochs: dict | None = None,
                     client_id: str = "") -> broker_pb2.OffsetFetchResponse:
        """`leader_epochs`, when given, is filled with each answered partition's committed leader epoch;
        `client_id`: the Kafka request header's, kept with the count of unstable answers."""
        err, p, st = self._state(req.group_id)
        if err != E.NONE:
            return broker_pb2.OffsetFetchResponse(error=err)
        resp = broker_pb2.OffsetFetchResponse(error=E.NONE)
        with self.lock:
            offs = st.offsets.get(req.group_id, {})
            tps = [(t.topic, t.partition) for t in req.partitions] or sorted(offs)
            for tp in tps:
                o, m, e = offs.get(tp, (-1, "", -1))
                perr = E.NONE
                if st.has_pending(req.group_id, tp):
                    if req.require_stable:
                        perr, o, e = E.UNSTABLE_OFFSET_COMMIT, -1, -1
                        resp.error = E.UNSTABLE_OFFSET_COMMIT
                    else:                     # answered the committed offset an open transaction may replace
                        n = self.unstable_fetches.setdefault(req.group_id, [0, ""])
                        n[0], n[1] = n[0] + 1, client_id or ""
                if leader_epochs is not None:
                    leader_epochs[tp] = e
                resp.partitions.add(topic=tp[0], partition=tp[1], offset=o, metadata=m, error=perr)
        return resp
