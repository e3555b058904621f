"""TopicAdminApis: a broker's topic administration requests (CreateTopics, CreatePartitions, DeleteTopics,
DeleteRecords), a part of BrokerApis.

Guarantees: CreateTopics, CreatePartitions and DeleteTopics are forwarded to the active controller, and
CreateTopics / DeleteTopics are answered once this broker's metadata has (has dropped) the topic, at
most the request's timeout (Kafka's DelayedCreatePartitions / DelayedDeleteTopics); the defaulting and
refusal of CreateTopics' partition and replica counts are services.broker.auto_topic_creation's; each
request is authorized as KafkaApis authorizes it (CREATE on the cluster or the topic, ALTER and DELETE
on the topic: TOPIC_AUTHORIZATION_FAILED for that topic, the others proceed). CreateTopics v0-v1 and
DeleteTopics v0 (releases before 4.0, read through legacy_versions) are served as their later versions
are, as Kafka's KafkaApis serves them: v0 has no validate_only (a creation, never a check), and each
answer carries what its version has (no error message before CreateTopics v1 and DeleteTopics v5).
"""
from __future__ import annotations

from eoslab.common import acl
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker.auto_topic_creation import creatable
from services.kafka_protocol.apis import field, ms


class TopicAdminApis:
    """Mixed into BrokerApis: uses its `s` (KafkaServer), `svc` (BrokerService), `rm` and `auth`."""

    def create_topics(self, header, req) -> dict:
        refused, pb = [], broker_pb2.CreateTopicsRequest(validate_only=bool(getattr(req, "validate_only", False)))
        cluster_create = self.auth.authorize_cluster(acl.CREATE)
        for t in req.topics:
            manual = list(t.assignments or ())
            if not cluster_create and not self.auth.authorize(acl.CREATE, acl.TOPIC, t.name):
                err, message = E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            elif manual and (int(t.num_partitions) != -1 or int(t.replication_factor) != -1):
                err, message = E.INVALID_REQUEST, ("Both numPartitions or replicationFactor and replicasAssignments "
                                                   "were set. Both cannot be used at the same time.")
            elif manual:
                err, message, partitions, rf = E.NONE, "", 0, 0
            else:
                err, message, partitions, rf = creatable(int(t.num_partitions), int(t.replication_factor),
                                                         getattr(self.s, "num_partitions", 1))
            if err != E.NONE:
                refused.append({"name": t.name, "error_code": err, "error_message": message, "num_partitions": -1,
                                "replication_factor": -1, "configs": []})
                continue
            pb.topics.add(name=t.name, num_partitions=partitions, replication_factor=rf,
                          configs={c.name: c.value for c in t.configs if c.value is not None},
                          assignments=[broker_pb2.CreatableReplicaAssignment(
                              partition=int(a.partition_index), broker_ids=list(a.broker_ids)) for a in manual])
        resp = self.svc.CreateTopics(pb, None) if pb.topics else broker_pb2.CreateTopicsResponse()
        # Kafka's DelayedCreatePartitions: answered once this broker's metadata has the new topics
        created = [] if pb.validate_only else [r.name for r in resp.topics if r.error == E.NONE]
        late = self._await_metadata(created, True, ms(field(req, "timeout")))
        for r in resp.topics:
            if r.name in late:
                r.error, r.error_message = E.REQUEST_TIMED_OUT, "the topic has not reached this broker's metadata yet"
        return {"topics": refused + [{"name": r.name, "error_code": r.error, "error_message": r.error_message or None,
                                      "num_partitions": r.num_partitions or -1,
                                      "replication_factor": r.replication_factor or -1, "configs": []}
                                     for r in resp.topics]}

    def _await_metadata(self, names: list[str], present: bool, timeout_ms: int) -> set[str]:
        """Topics of `names` not yet (present) or still (not present) in this broker's metadata after
        the request's timeout; a timeout of 0 or less answers at once, as Kafka's ZkAdminManager does."""
        if timeout_ms <= 0 or not names:
            return set()
        return self.s.metadata.await_topics(names, present, timeout_ms / 1000.0)

    def create_partitions(self, header, req) -> dict:
        from eoslab.v1 import controller_pb2
        pb = controller_pb2.CreatePartitionsRequest(validate_only=bool(req.validate_only))
        refused = []
        for t in req.topics:
            if not self.auth.authorize(acl.ALTER, acl.TOPIC, t.name):
                refused.append({"name": t.name, "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                                "error_message": "Authorization failed."})
                continue
            pb.topics.add(name=t.name, count=int(t.count), has_assignments=t.assignments is not None,
                          assignments=[controller_pb2.ReplicaList(broker_ids=list(a.broker_ids))
                                       for a in t.assignments or ()])
        resp = self.svc.create_partitions(pb) if pb.topics else controller_pb2.CreatePartitionsResponse()
        return {"results": refused + [{"name": r.name, "error_code": r.error, "error_message": r.error_message or None}
                                      for r in resp.results]}

    def delete_topics(self, header, req) -> dict:
        """DeleteTopics v0-v6 (names; v6 names or topic ids, an unknown id UNKNOWN_TOPIC_ID). As Kafka's
        DelayedDeleteTopics, a deleted topic's answer waits until this broker's metadata no longer has
        it, at most the request's timeout (then REQUEST_TIMED_OUT); CreateTopics likewise waits until the
        topic is there."""
        from eoslab.v1 import controller_pb2
        from eoslab.common.topics import topic_id_text, topic_id_uuid
        md = self.s.metadata
        if header.api_version >= 6:
            names = [t.name or md.topic_name(topic_id_text(t.topic_id)) for t in req.topics]
            ids = {n: topic_id_uuid(md.topic_ids.get(n)) for n in names if n}
        else:
            names, ids = list(req.topic_names), {}
        deletable = self.auth.authorized(acl.DELETE, acl.TOPIC, [n for n in names if n])
        asked = [n for n in names if n in deletable]
        resp = self.svc.delete_topics(controller_pb2.DeleteTopicsRequest(names=asked)) if asked else None
        results = {r.name: [r.error, r.error_message or None] for r in (resp.results if resp else ())}
        results.update({n: [E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."] for n in names
                        if n and n not in deletable})
        late = self._await_metadata([n for n, r in results.items() if r[0] == E.NONE], False,
                                    ms(field(req, "timeout")))
        for name in late:
            results[name] = [E.REQUEST_TIMED_OUT, "the deletion has not reached this broker's metadata yet"]
        out = []
        for i, n in enumerate(names):
            err, msg = results[n] if n else [E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."]
            entry = {"name": n, "error_code": err}
            if header.api_version >= 5:
                entry["error_message"] = msg
            if header.api_version >= 6:
                entry["topic_id"] = ids.get(n) if n else req.topics[i].topic_id
            out.append(entry)
        return {"responses": out}

    def delete_records(self, header, req) -> dict:
        """DeleteRecords v0-v2: services/broker/record_deletion.py, answered once the low watermarks
        reach the offsets asked or the request's timeout passed."""
        from services.broker.record_deletion import delete_records
        asked = [(t.name, int(p.partition_index), int(p.offset)) for t in req.topics for p in t.partitions]
        deletable = self.auth.authorized(acl.DELETE, acl.TOPIC, [t for t, _, _ in asked])
        res = delete_records(self.rm, [x for x in asked if x[0] in deletable], ms(req.timeout))
        res.update({(t, p): (E.TOPIC_AUTHORIZATION_FAILED, -1, "") for t, p, _ in asked if t not in deletable})
        by_topic: dict[str, list] = {}
        for topic, partition, _ in asked:
            err, low, _msg = res[(topic, partition)]
            by_topic.setdefault(topic, []).append({"partition_index": partition, "low_watermark": low,
                                                   "error_code": err})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
