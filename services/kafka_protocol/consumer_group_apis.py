"""The consumer group protocol's Kafka requests (KIP-848): ConsumerGroupHeartbeat (API 68) and
ConsumerGroupDescribe (API 69), answered by the broker's group coordinator
(services.broker.consumer_group_manager).

Guarantees: a request for a group this broker does not coordinate is answered with the coordinator's
error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) and changes nothing; every other answer is the
ConsumerGroupManager's, with Kafka's fields: the member id (the coordinator's on a v0 join without
one), the member epoch, the heartbeat interval and, when given, the assignment as topic ids and
partitions. Registered only on a release with KafkaVersion.consumer_group_protocol (4.0), so a client
of an older release is told by ApiVersions they are not there.
"""
from __future__ import annotations

from services.broker.consumer_group_manager import Heartbeat
from services.kafka_protocol.acl_apis import authorized_operations
from services.kafka_protocol.apis import E

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
VERSIONS = {CONSUMER_GROUP_HEARTBEAT: (0, 1), CONSUMER_GROUP_DESCRIBE: (0, 0)}


def _owned(req) -> dict | None:
    if req.topic_partitions is None:
        return None
    return {t.topic_id: [int(p) for p in t.partitions] for t in req.topic_partitions}


class ConsumerGroupApis:
    def __init__(self, broker_apis):
        self.gc = broker_apis.s.group_coordinator
        self.authorizer = getattr(broker_apis, "authorizer", None)

    def heartbeat(self, header, req) -> dict:
        err = self.gc.owns(req.group_id) if req.group_id else E.NONE
        if err != E.NONE:
            return {"error_code": err, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
                    "assignment": None}
        r = Heartbeat(group_id=req.group_id, member_id=req.member_id or "", member_epoch=int(req.member_epoch),
                      instance_id=req.instance_id, rack_id=req.rack_id,
                      rebalance_timeout_ms=int(req.rebalance_timeout.total_seconds() * 1000)
                      if hasattr(req.rebalance_timeout, "total_seconds") else int(req.rebalance_timeout),
                      subscribed_topic_names=None if req.subscribed_topic_names is None
                      else list(req.subscribed_topic_names),
                      subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
                      server_assignor=req.server_assignor, owned=_owned(req), client_id=header.client_id or "",
                      api_version=header.api_version)
        out = self.gc.consumer_groups.heartbeat(r)
        out["heartbeat_interval"] = out.pop("heartbeat_interval_ms")
        assignment = out.pop("assignment")
        out["assignment"] = None if assignment is None else {"topic_partitions": [
            {"topic_id": t, "partitions": ps} for t, ps in sorted(assignment.items(), key=lambda x: str(x[0]))]}
        return out

    def describe(self, header, req) -> dict:
        return {"groups": [self._describe(g, authorized_operations(   # served on 4.0 only
            "group", bool(req.include_authorized_operations), "4.0", self.authorizer, g)) for g in req.group_ids]}

    def _describe(self, group_id: str, ops: int) -> dict:
        base = {"group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                "assignor_name": "", "members": [], "authorized_operations": ops}
        err = self.gc.owns(group_id)
        if err != E.NONE:
            return dict(base, error_code=err)
        cg = self.gc.consumer_groups
        with cg.lock:
            g = cg.group(group_id)
            if g is None:
                msg = f"Group {group_id} not found." if cg.classic_members(group_id) is None \
                    else f"Group {group_id} is not a consumer group."
                return dict(base, error_code=E.GROUP_ID_NOT_FOUND, error_message=msg)
            names = {tid: name for name, (tid, _) in g.subscription.items()}

            def parts(a):
                return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                             for t, ps in sorted(a.items(), key=lambda x: str(x[0]))]}
            members = [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex, "assignment": parts(m.assigned),
                        "target_assignment": parts(g.target.get(m.member_id, {}))}
                       for m in g.members.values()]
            return dict(base, error_code=E.NONE, group_state=str(g.state), group_epoch=g.group_epoch,
                        assignment_epoch=g.assignment_epoch, assignor_name=cg.preferred_assignor_name(g),
                        members=members)


def register_consumer_group_apis(apis, release: str | None = None) -> None:
    """Serve the APIs where the release has the protocol (KafkaVersion.consumer_group_protocol)."""
    from eoslab import kafka_version
    if not kafka_version.get(release).consumer_group_protocol:
        return
    c = ConsumerGroupApis(apis)
    heartbeat, describe = c.heartbeat, c.describe
    if getattr(apis, "authorizer", None) is not None:      # checked first, as KafkaApis does
        from services.kafka_protocol.group_authorization import GroupAuthorization
        checked = GroupAuthorization(None, apis.auth, c)
        heartbeat, describe = checked.consumer_group_heartbeat, checked.consumer_group_describe
    for key, fn in ((CONSUMER_GROUP_HEARTBEAT, heartbeat), (CONSUMER_GROUP_DESCRIBE, describe)):
        apis.register(key, *VERSIONS[key], fn)
