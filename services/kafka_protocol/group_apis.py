"""The group coordinator's Kafka requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, TxnOffsetCommit, ListGroups and DescribeGroups (services.broker.group_listing), DeleteGroups and
OffsetDelete (services.broker.group_deletion), translated to the calls the broker's gRPC servicer makes.

Guarantees: the lab's group coordinator runs Kafka's classic (eager)
group protocol for any protocol type ("consumer", Kafka Streams' and
Connect's "connect", ...): each member's offered protocols and their
metadata, and the leader's assignments, pass through untouched, so
assignor user data and KIP-429's owned partitions reach the leader as the
members sent them and cooperative rebalancing (a client-side protocol on the
classic one) works. The protocol is chosen as Kafka's ClassicGroup chooses
it (services.broker.group_protocols). Errors are the coordinator's
(NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, ...). A committed
offset keeps the leader epoch its OffsetCommit/TxnOffsetCommit carried, and
OffsetFetch returns it (-1 when the commit had none). A commit's partition
this broker's metadata does not know is answered UNKNOWN_TOPIC_OR_PARTITION
and never reaches the coordinator, as in Kafka's KafkaApis. OffsetCommit v0 and
OffsetFetch v0 (releases before 4.0) keep offsets in ZooKeeper on any broker, as
ZooKeeper-mode Kafka does (zk_offsets.py); OffsetCommit v1 goes to the coordinator
as v2 does: its per-partition commit timestamp, which Kafka keeps for expiring the
offset, is read and has no effect, as the lab expires no committed offset on any
release. OffsetFetch v0-v1, which have no top-level error, carry a group's error
(NOT_COORDINATOR, ...) on every partition asked, as Kafka's getErrorResponse does.
"""
from __future__ import annotations

from eoslab.v1 import broker_pb2, common_pb2
from services.broker import group_deletion, group_listing
from services.kafka_protocol.acl_apis import authorized_operations
from services.kafka_protocol import zk_offsets
from services.kafka_protocol.apis import E, fenced_error, ms

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 8, 9, 28
DELETE_GROUPS, OFFSET_DELETE = 42, 47


def _instance(req) -> str:
    """The request's group instance id (KIP-345: JoinGroup v5+, the others from the version that added it)."""
    return getattr(req, "group_instance_id", None) or ""


class GroupApis:
    def __init__(self, broker_apis):
        self.svc = broker_apis.svc
        self.gc = broker_apis.s.group_coordinator   # offsets with their leader epochs (not in the gRPC messages)
        self.metadata = broker_apis.s.metadata      # the broker's MetadataCache
        self.release = getattr(broker_apis.s, "kafka_version", None)
        self.authorizer = getattr(broker_apis, "authorizer", None)
        self.zk = getattr(broker_apis.s, "zk", None)   # OffsetCommit v0 / OffsetFetch v0 keep offsets there

    def join_group(self, header, req) -> dict:
        def fail(err):
            return {"error_code": err, "generation_id": -1, "protocol_name": "", "leader": "",
                    "member_id": req.member_id or ""}
        session = ms(req.session_timeout)
        rebalance = ms(getattr(req, "rebalance_timeout", session))
        r = self.gc.join(broker_pb2.JoinGroupRequest(
            group_id=req.group_id, session_timeout_ms=session, rebalance_timeout_ms=rebalance if rebalance > 0
            else session, member_id=req.member_id or "", protocol_type=req.protocol_type or "",
            protocols=[broker_pb2.GroupProtocol(name=p.name, metadata=bytes(p.metadata or b""))
                       for p in req.protocols], group_instance_id=_instance(req)),
            header.client_id or "")
        if r.error != E.NONE:
            return fail(r.error)
        return {"error_code": E.NONE, "generation_id": r.generation_id, "protocol_type": r.protocol_type,
                "protocol_name": r.protocol_name, "leader": r.leader, "member_id": r.member_id,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id or None,
                             "metadata": bytes(m.metadata)} for m in r.members]}

    def sync_group(self, header, req) -> dict:
        pb = broker_pb2.SyncGroupRequest(group_id=req.group_id, generation_id=int(req.generation_id),
                                         member_id=req.member_id, group_instance_id=_instance(req))
        for a in req.assignments:
            pb.assignment_bytes[a.member_id] = bytes(a.assignment or b"")
        r = self.svc.SyncGroup(pb, None)
        return {"error_code": r.error, "protocol_type": r.protocol_type or None,
                "protocol_name": r.protocol_name or None,
                "assignment": bytes(r.assignment_bytes) if r.error == E.NONE else b""}

    def heartbeat(self, header, req) -> dict:
        r = self.svc.Heartbeat(broker_pb2.HeartbeatRequest(group_id=req.group_id,
                                                           generation_id=int(req.generation_id),
                                                           member_id=req.member_id,
                                                           group_instance_id=_instance(req)), None)
        return {"error_code": r.error}

    def leave_group(self, header, req) -> dict:
        who = [(m.member_id, _instance(m)) for m in req.members] if header.api_version >= 3 \
            else [(req.member_id, "")]
        results = [(mid, inst, self.svc.LeaveGroup(broker_pb2.LeaveGroupRequest(
            group_id=req.group_id, member_id=mid or "", group_instance_id=inst), None).error) for mid, inst in who]
        top = next((e for _, _, e in results if e != E.NONE), E.NONE) if header.api_version < 3 else E.NONE
        return {"error_code": top, "members": [{"member_id": mid, "group_instance_id": inst or None, "error_code": e}
                                               for mid, inst, e in results]}

    def _unknown(self, req) -> set:
        """The (topic, partition) pairs a commit names that this broker's metadata does not know: Kafka's
        KafkaApis answers them UNKNOWN_TOPIC_OR_PARTITION and hands only the rest to the coordinator."""
        return {(t.name, int(p.partition_index)) for t in req.topics for p in t.partitions
                if not self.metadata.has_partition(t.name, int(p.partition_index))}

    @staticmethod
    def _commit_partitions(req, unknown: set) -> list:
        return [broker_pb2.OffsetCommitPartition(topic=t.name, partition=int(p.partition_index),
                                                 offset=int(p.committed_offset),
                                                 metadata=p.committed_metadata or "")
                for t in req.topics for p in t.partitions if (t.name, int(p.partition_index)) not in unknown]

    @staticmethod
    def _commit_epochs(req) -> dict:
        """(topic, partition) -> committed_leader_epoch (OffsetCommit v6+, TxnOffsetCommit v2+; else -1)."""
        return {(t.name, int(p.partition_index)): int(getattr(p, "committed_leader_epoch", -1))
                for t in req.topics for p in t.partitions}

    @staticmethod
    def _commit_answer(req, resp, unknown: set) -> dict:
        errors = {(p.topic, p.partition): p.error for p in resp.partitions} if resp is not None else {}
        top = resp.error if resp is not None else E.NONE

        def error(topic, partition):
            if (topic, partition) in unknown:
                return E.UNKNOWN_TOPIC_OR_PARTITION
            return top if top != E.NONE else errors.get((topic, partition), E.NONE)
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": error(t.name, int(p.partition_index))}
            for p in t.partitions]} for t in req.topics]}

    def offset_commit(self, header, req) -> dict:
        generation = int(getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1)))
        unknown = self._unknown(req)
        if header.api_version == 0:        # KafkaApis: "for version 0 always store offsets to ZK"
            return zk_offsets.offset_commit_v0(self.zk, req, unknown)
        known = self._commit_partitions(req, unknown)
        r = self.gc.offset_commit(broker_pb2.OffsetCommitRequest(
            group_id=req.group_id, generation_id=generation, member_id=req.member_id or "",
            group_instance_id=_instance(req), partitions=known), self._commit_epochs(req), header.api_version) \
            if known or not unknown else None
        return self._commit_answer(req, r, unknown)

    def txn_offset_commit(self, header, req) -> dict:
        unknown = self._unknown(req)
        known = self._commit_partitions(req, unknown)
        r = self.gc.txn_offset_commit(broker_pb2.TxnOffsetCommitRequest(
            transactional_id=req.transactional_id, group_id=req.group_id, producer_id=int(req.producer_id),
            producer_epoch=int(req.producer_epoch), generation_id=int(getattr(req, "generation_id", -1)),
            member_id=getattr(req, "member_id", "") or "", group_instance_id=_instance(req), partitions=known,
            add_partition_to_txn=header.api_version >= 5),     # KIP-890 part 2: no AddOffsetsToTxn before it
            self._commit_epochs(req)) if known or not unknown else None
        out = self._commit_answer(req, r, unknown)
        for t in out["topics"]:              # KIP-588: PRODUCER_FENCED from v3 on
            for p in t["partitions"]:
                p["error_code"] = fenced_error(p["error_code"], header.api_version, 3)
        return out

    def offset_fetch(self, header, req) -> dict:
        if header.api_version >= 8:        # KIP-709: groups batched; v9 (KIP-848) with member id and epoch
            stable = bool(req.require_stable)
            return {"groups": [self._fetch_group(header, g, stable) for g in req.groups]}
        if header.api_version == 0:        # KafkaApis: "version 0 reads offsets from ZK"
            return zk_offsets.offset_fetch_v0(self.zk, self.metadata, req)
        err, topics = self._fetch(header, req.group_id, req.topics, bool(getattr(req, "require_stable", False)))
        if err != E.NONE and header.api_version < 2:
            return fetch_error_v1(req, err)
        return {"error_code": err, "topics": topics}

    def _fetch_group(self, header, g, require_stable: bool) -> dict:
        err = self.gc.consumer_groups.validate_offset_fetch(g.group_id, getattr(g, "member_id", None),
                                                            int(getattr(g, "member_epoch", -1)))
        if err != E.NONE:
            return {"group_id": g.group_id, "error_code": err, "topics": []}
        err, topics = self._fetch(header, g.group_id, g.topics, require_stable)
        return {"group_id": g.group_id, "error_code": E.NONE if err == E.UNSTABLE_OFFSET_COMMIT else err,
                "topics": topics}

    def _fetch(self, header, group_id: str, topics, require_stable: bool) -> tuple[int, list]:
        pb = broker_pb2.OffsetFetchRequest(group_id=group_id, require_stable=require_stable)
        for t in topics or ():
            pb.partitions.extend(common_pb2.TopicPartition(topic=t.name, partition=int(p))
                                 for p in t.partition_indexes)
        epochs: dict = {}
        r = self.gc.offset_fetch(pb, epochs, header.client_id or "")
        by_topic: dict[str, list] = {}
        for p in r.partitions:
            by_topic.setdefault(p.topic, []).append({
                "partition_index": p.partition, "committed_offset": p.offset,
                "committed_leader_epoch": epochs.get((p.topic, p.partition), -1),
                "metadata": p.metadata, "error_code": p.error if header.api_version >= 2 or r.error == E.NONE
                else r.error})
        return r.error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    def list_groups(self, header, req) -> dict:
        groups = group_listing.list_groups(self.gc, getattr(req, "states_filter", None) or (),
                                           getattr(req, "types_filter", None) or ())
        return {"error_code": E.NONE, "groups": [{"group_id": g, "protocol_type": t, "group_state": st,
                                                  "group_type": kind} for g, t, st, kind in groups]}

    def describe_groups(self, header, req) -> dict:
        out = []
        for group in req.groups:
            err, fields = group_listing.describe_group(self.gc, group)
            out.append(dict(fields, error_code=err, group_id=group,
                            authorized_operations=authorized_operations(
                                "group", bool(getattr(req, "include_authorized_operations", False)), self.release,
                                self.authorizer, group)))
        return {"groups": out}

    def delete_groups(self, header, req) -> dict:
        """Each named group once (Kafka's KafkaApis takes them distinct); an empty id is INVALID_GROUP_ID."""
        names = list(dict.fromkeys(req.groups_names))
        results = [(g, E.INVALID_GROUP_ID) if not g else (g, None) for g in names]
        done = dict(group_deletion.delete_groups(self.gc, [g for g, err in results if err is None]))
        return {"results": [{"group_id": g, "error_code": done[g] if err is None else err} for g, err in results]}

    def offset_delete(self, header, req) -> dict:
        """KafkaApis.handleOffsetDeleteRequest: a topic or partition this broker's metadata does not know is
        UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator; an empty group id INVALID_GROUP_ID."""
        if not req.group_id:
            return {"error_code": E.INVALID_GROUP_ID, "topics": []}
        unknown, asked = {}, []
        for t in req.topics:
            parts = [int(p.partition_index) for p in t.partitions]
            bad = [n for n in parts if not self.metadata.has_partition(t.name, n)]
            if bad:
                unknown[t.name] = bad
            good = [n for n in parts if n not in bad]
            if good:
                asked.append((t.name, good))
        err, answered = group_deletion.delete_offsets(self.gc, req.group_id, asked)
        if err != E.NONE:
            return {"error_code": err, "topics": []}
        by_topic: dict[str, list] = {t: [{"partition_index": n, "error_code": e} for n, e in ps]
                                     for t, ps in answered}
        for t, ns in unknown.items():
            by_topic.setdefault(t, []).extend({"partition_index": n, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION}
                                              for n in ns)
        return {"error_code": E.NONE, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def fetch_error_v1(req, err: int) -> dict:
    """OffsetFetchRequest.getErrorResponse before v2 (no top-level error): every partition asked, offset -1."""
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": int(p), "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": err} for p in t.partition_indexes]} for t in req.topics or ()]}


VERSIONS = {DESCRIBE_GROUPS: (0, 5), LIST_GROUPS: (0, 5), JOIN_GROUP: (0, 7), SYNC_GROUP: (0, 5), HEARTBEAT: (0, 4), LEAVE_GROUP: (0, 4), OFFSET_COMMIT: (0, 9),
            OFFSET_FETCH: (0, 9), TXN_OFFSET_COMMIT: (0, 5), DELETE_GROUPS: (0, 2), OFFSET_DELETE: (0, 0)}


def register_group_apis(apis) -> None:
    g = GroupApis(apis)
    if getattr(apis, "authorizer", None) is not None:      # checked first, as KafkaApis does
        from services.kafka_protocol.group_authorization import GroupAuthorization
        g = GroupAuthorization(g, apis.auth)
    for key, fn in ((JOIN_GROUP, g.join_group), (SYNC_GROUP, g.sync_group), (HEARTBEAT, g.heartbeat),
                    (LEAVE_GROUP, g.leave_group), (OFFSET_COMMIT, g.offset_commit), (OFFSET_FETCH, g.offset_fetch),
                    (TXN_OFFSET_COMMIT, g.txn_offset_commit), (LIST_GROUPS, g.list_groups),
                    (DESCRIBE_GROUPS, g.describe_groups), (DELETE_GROUPS, g.delete_groups),
                    (OFFSET_DELETE, g.offset_delete)):
        apis.register(key, *VERSIONS[key], fn)
