"""GroupAuthorization: the group coordinator's Kafka requests checked as KafkaApis checks them, before
GroupApis / ConsumerGroupApis handle what is allowed.

Guarantees (each KafkaApis' rule; with no authorizer everything passes and the handlers answer as
without this layer):
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup and ConsumerGroupHeartbeat need READ on the group
  (GROUP_AUTHORIZATION_FAILED, nothing reaches the coordinator);
- OffsetCommit needs READ on the group (every partition GROUP_AUTHORIZATION_FAILED) and READ on each
  topic (its partitions TOPIC_AUTHORIZATION_FAILED; the rest is committed);
- TxnOffsetCommit needs WRITE on the transactional id (every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group and on each topic, as OffsetCommit;
- OffsetFetch needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for it; before v2, which has no
  top-level error, on every partition asked) and DESCRIBE on each
  topic named (its partitions TOPIC_AUTHORIZATION_FAILED, offset -1); a fetch of all the group's
  offsets leaves out the topics not DESCRIBE-authorized;
- DescribeGroups and ConsumerGroupDescribe need DESCRIBE on each group, DeleteGroups DELETE, OffsetDelete
  DELETE on the group and READ on each topic; ListGroups lists every group with DESCRIBE on the
  cluster, else only the groups DESCRIBE-authorized.
"""
from __future__ import annotations

from eoslab.common import acl
from eoslab.common.errors import E
from services.kafka_protocol.apis import replace

GAF, TAF, TXN_AF = E.GROUP_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _partitions_answer(req, code_of) -> list:
    return [{"name": t.name, "partitions": [{"partition_index": int(p.partition_index), "error_code": code_of(t.name)}
                                            for p in t.partitions]} for t in req.topics]


class GroupAuthorization:
    def __init__(self, groups, auth, consumer_groups=None):
        self.g, self.cg, self.auth = groups, consumer_groups, auth

    def _group(self, op: int, group_id: str) -> bool:
        return self.auth.authorize(op, acl.GROUP, group_id or "")

    def join_group(self, header, req):
        if not self._group(acl.READ, req.group_id):
            return {"error_code": GAF, "generation_id": -1, "protocol_name": "", "leader": "",
                    "member_id": req.member_id or ""}
        return self.g.join_group(header, req)

    def sync_group(self, header, req):
        if not self._group(acl.READ, req.group_id):
            return {"error_code": GAF, "protocol_type": None, "protocol_name": None, "assignment": b""}
        return self.g.sync_group(header, req)

    def heartbeat(self, header, req):
        return {"error_code": GAF} if not self._group(acl.READ, req.group_id) else self.g.heartbeat(header, req)

    def leave_group(self, header, req):
        return {"error_code": GAF, "members": []} if not self._group(acl.READ, req.group_id) \
            else self.g.leave_group(header, req)

    def _commit(self, header, req, handle):
        readable = self.auth.authorized(acl.READ, acl.TOPIC, [t.name for t in req.topics])
        if len(readable) == len({t.name for t in req.topics}):
            return handle(header, req)
        kept = tuple(t for t in req.topics if t.name in readable)
        done = handle(header, replace(req, topics=kept)) if kept else {"topics": []}
        refused = _partitions_answer(replace(req, topics=tuple(t for t in req.topics
                                                                             if t.name not in readable)),
                                     lambda _: TAF)
        return {**done, "topics": refused + list(done["topics"])}

    def offset_commit(self, header, req):
        if not self._group(acl.READ, req.group_id):
            return {"topics": _partitions_answer(req, lambda _: GAF)}
        return self._commit(header, req, self.g.offset_commit)

    def txn_offset_commit(self, header, req):
        if not self.auth.authorize(acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id or ""):
            return {"topics": _partitions_answer(req, lambda _: TXN_AF)}
        if not self._group(acl.READ, req.group_id):
            return {"topics": _partitions_answer(req, lambda _: GAF)}
        return self._commit(header, req, self.g.txn_offset_commit)

    def _fetch_topics(self, topics_asked, answered: list) -> list:
        """The answer's topics with the unauthorized ones refused (named) or left out (all asked for)."""
        if topics_asked is None:
            seen = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, [t["name"] for t in answered])
            return [t for t in answered if t["name"] in seen]
        seen = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, [t.name for t in topics_asked])
        refused = [{"name": t.name, "partitions": [
            {"partition_index": int(p), "committed_offset": -1, "committed_leader_epoch": -1, "metadata": None,
             "error_code": TAF} for p in t.partition_indexes]} for t in topics_asked if t.name not in seen]
        return [t for t in answered if t["name"] in seen] + refused

    def offset_fetch(self, header, req):
        if header.api_version >= 8:
            refused = [g for g in req.groups if not self._group(acl.DESCRIBE, g.group_id)]
            allowed = tuple(g for g in req.groups if g not in refused)
            out = self.g.offset_fetch(header, replace(req, groups=allowed)) if allowed else {"groups": []}
            by_id = {g["group_id"]: g for g in out["groups"]}
            for g in allowed:
                got = by_id[g.group_id]
                got["topics"] = self._fetch_topics(g.topics, list(got["topics"]))
            return {"groups": [by_id[g.group_id] if g not in refused else
                               {"group_id": g.group_id, "error_code": GAF, "topics": []} for g in req.groups]}
        if not self._group(acl.DESCRIBE, req.group_id):
            if header.api_version < 2:
                from services.kafka_protocol.group_apis import fetch_error_v1
                return fetch_error_v1(req, GAF)
            return {"error_code": GAF, "topics": []}
        out = self.g.offset_fetch(header, req)
        out["topics"] = self._fetch_topics(req.topics, list(out["topics"]))
        return out

    def list_groups(self, header, req):
        out = self.g.list_groups(header, req)
        if not self.auth.authorize_cluster(acl.DESCRIBE):
            seen = self.auth.authorized(acl.DESCRIBE, acl.GROUP, [g["group_id"] for g in out["groups"]])
            out["groups"] = [g for g in out["groups"] if g["group_id"] in seen]
        return out

    def describe_groups(self, header, req):
        seen = self.auth.authorized(acl.DESCRIBE, acl.GROUP, req.groups)
        allowed = tuple(g for g in req.groups if g in seen)
        out = self.g.describe_groups(header, replace(req, groups=allowed)) if allowed else {"groups": []}
        by_id = {g["group_id"]: g for g in out["groups"]}
        return {"groups": [by_id[g] if g in seen else {"group_id": g, "error_code": GAF, "group_state": "",
                                                        "protocol_type": "", "protocol_data": "", "members": []}
                           for g in req.groups]}

    def delete_groups(self, header, req):
        deletable = self.auth.authorized(acl.DELETE, acl.GROUP, req.groups_names)
        allowed = tuple(g for g in req.groups_names if g in deletable)
        out = self.g.delete_groups(header, replace(req, groups_names=allowed)) if allowed \
            else {"results": []}
        by_id = {r["group_id"]: r for r in out["results"]}
        return {"results": [by_id.get(g, {"group_id": g, "error_code": GAF}) for g in dict.fromkeys(req.groups_names)]}

    def offset_delete(self, header, req):
        if req.group_id and not self._group(acl.DELETE, req.group_id):
            return {"error_code": GAF, "topics": []}
        readable = self.auth.authorized(acl.READ, acl.TOPIC, [t.name for t in req.topics])
        kept = tuple(t for t in req.topics if t.name in readable)
        out = self.g.offset_delete(header, replace(req, topics=kept))
        if out["error_code"] != E.NONE:
            return out
        out["topics"] = list(out["topics"]) + _partitions_answer(
            replace(req, topics=tuple(t for t in req.topics if t.name not in readable)), lambda _: TAF)
        return out

    def consumer_group_heartbeat(self, header, req):
        if not self._group(acl.READ, req.group_id):
            return {"error_code": GAF, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
                    "assignment": None}
        return self.cg.heartbeat(header, req)

    def consumer_group_describe(self, header, req):
        seen = self.auth.authorized(acl.DESCRIBE, acl.GROUP, req.group_ids)
        allowed = tuple(g for g in req.group_ids if g in seen)
        out = self.cg.describe(header, replace(req, group_ids=allowed)) if allowed else {"groups": []}
        by_id = {g["group_id"]: g for g in out["groups"]}
        return {"groups": [by_id[g] if g in seen else {"group_id": g, "error_code": GAF, "group_state": "",
                                                        "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                                                        "members": []} for g in req.group_ids]}
