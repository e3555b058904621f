"""Operators' views through real Kafka clients: `eoslab cluster status`, ListTransactions and
DescribeProducers (KIP-664) against a real local cluster."""
import os
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.kafka_protocol.real_clients_support import _topic  # noqa: E402


def _outcome(future) -> str:
    """An admin future's outcome: "ok", or the name of the Kafka error it failed with."""
    from confluent_kafka import KafkaException
    try:
        future.result(30)
        return "ok"
    except KafkaException as e:
        return e.args[0].name()


def test_cluster_status_shows_kafka_bootstrap_beside_bootstrap(kcluster, eoslab_home):
    import json
    import subprocess
    import sys
    env = dict(os.environ, EOSLAB_HOME=eoslab_home)
    info = kcluster.info()
    run = [sys.executable, "-m", "eoslab", "cluster", "status", "--name", kcluster.cluster_name, "--runtime", "local"]
    text = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60).stdout
    assert f"bootstrap {info.bootstrap}, kafka_bootstrap {info.kafka_bootstrap}" in text
    d = json.loads(subprocess.run(run + ["--json"], env=env, capture_output=True, text=True, timeout=60).stdout)
    assert d["kafka_bootstrap"] == info.kafka_bootstrap
    assert [a.split(":")[0] for a in d["kafka_bootstrap"].split(",")] == [n.host for n in info.by_role("broker")]


def test_list_transactions_on_the_coordinators_names_a_committed_transactional_id(kcluster):
    import socket

    from cluster.local_nodes import KAFKA_PORT
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-list")
    tid = f"listed-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": boot, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x")
    p.commit_transaction(30)

    def listed() -> dict:
        seen = {}
        for node in kcluster.info().by_role("txn-coordinator"):
            with socket.create_connection((node.host, KAFKA_PORT), timeout=10) as s:
                s.sendall(_request(66, 1, 5, state_filters=["CompleteCommit", "NoSuchState"],
                                   producer_id_filters=[], duration_filter=-1))
                corr, r = _response(_read_frame(s), 66, 1)
            assert corr == 5 and r.error_code.value == 0 and list(r.unknown_state_filters) == ["NoSuchState"]
            assert all(t.transaction_state == "CompleteCommit" for t in r.transaction_states)
            seen.update({t.transactional_id: t.transaction_state for t in r.transaction_states})
        return seen
    h.wait_for(lambda: tid in listed(), timeout=15, what=f"{tid} listed in CompleteCommit")   # after the markers


def test_describe_producers_shows_the_producer_state_on_leader_and_followers(kcluster):
    import socket

    from cluster.local_nodes import KAFKA_PORT
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-desc")
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all"})
    for i in range(7):
        p.produce(topic, f"v{i}".encode())
        p.flush(30)                                        # one batch per record: sequences 0..6
    t = Producer({"bootstrap.servers": boot, "transactional.id": f"desc-{uuid.uuid4().hex[:6]}"})
    t.init_transactions(30)
    t.begin_transaction()
    t.produce(topic, b"open")
    assert t.flush(30) == 0                                 # written at offset 7, the transaction left open
    leader = AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=30).topics[topic].partitions[0].leader

    def describe(node):
        with socket.create_connection((node.host, KAFKA_PORT), timeout=10) as s:
            s.sendall(_request(61, 0, 9, topics=[{"name": topic, "partition_indexes": [0]}]))
            corr, r = _response(_read_frame(s), 61, 0)
        assert corr == 9
        [part] = r.topics[0].partitions
        return part
    brokers = kcluster.info().by_role("broker")
    part = describe(next(n for n in brokers if n.node_id == leader))
    assert part.error_code.value == 0
    states = sorted((s.last_sequence, s.current_txn_start_offset) for s in part.active_producers)
    assert states == [(0, 7), (6, -1)]
    assert all(s.last_timestamp > 0 and s.producer_id >= 0 for s in part.active_producers)
    follower = next(n for n in brokers if n.node_id != leader)

    def follower_states():    # Kafka answers on any replica from its own producer state, once replicated
        part = describe(follower)
        assert part.error_code.value == 0
        return sorted((s.last_sequence, s.current_txn_start_offset) for s in part.active_producers)
    h.wait_for(lambda: follower_states() == states, timeout=15, what="the follower's producer state")
    t.abort_transaction(30)


def test_librdkafka_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(kcluster):
    from confluent_kafka import Consumer, TopicPartition
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "times")
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    base = 1_700_000_000_000
    for i, ts in enumerate((base, base + 2000, base + 1000, base + 3000)):     # offsets 0-3
        p.produce(topic, f"v{i}".encode(), partition=0, timestamp=ts)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": boot, "group.id": f"t-{uuid.uuid4().hex[:6]}"})
    try:
        asked = [TopicPartition(topic, 0, base + 500), TopicPartition(topic, 0, base + 1500)]
        found = [c.offsets_for_times([tp], timeout=30)[0] for tp in asked]
        assert [(tp.error, tp.offset) for tp in found] == [(None, 1), (None, 1)]   # 2000 precedes 1000
        late = c.offsets_for_times([TopicPartition(topic, 0, base + 9000)], timeout=30)[0]
        assert late.error is None and late.offset == -1                           # none that late: end
    finally:
        c.close()


def test_librdkafka_admin_adds_partitions_and_the_new_ones_take_records(kcluster):
    from confluent_kafka.admin import NewPartitions
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "grow", partitions=2)
    admin = AdminClient({"bootstrap.servers": boot})

    def create(count, validate_only=False, name=topic):
        f = admin.create_partitions([NewPartitions(name, count)], validate_only=validate_only,
                                    operation_timeout=30)[name]
        return _outcome(f)

    def partitions():
        return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    assert create(4, validate_only=True) == "ok" and partitions() == 2          # validated, not written
    assert create(1) == "INVALID_PARTITIONS" and create(2) == "INVALID_PARTITIONS"
    assert create(3, name=f"none-{uuid.uuid4().hex[:6]}") == "UNKNOWN_TOPIC_OR_PART"
    assert create(4) == "ok"
    h.wait_for(lambda: partitions() == 4, timeout=30, what="4 partitions in Metadata")
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    for part in range(4):
        p.produce(topic, f"to-{part}".encode(), partition=part)
    assert p.flush(30) == 0                                                     # the new leaders take them


def test_librdkafka_admin_deletes_a_topic_its_replicas_go_and_the_name_can_be_used_again(kcluster):
    from confluent_kafka import KafkaException
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "doomed", partitions=2)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    p.produce(topic, b"old", partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": boot})
    dirs = [os.path.join(kcluster.dir, "data", n, f"{topic}-0") for n in ("broker-1", "broker-2", "broker-3")]
    assert any(os.path.isdir(d) for d in dirs), dirs

    def delete(name):
        return _outcome(admin.delete_topics([name], operation_timeout=30)[name])
    assert delete(topic) == "ok"
    assert topic not in admin.list_topics(timeout=10).topics                   # gone from Metadata at once
    h.wait_for(lambda: not any(os.path.isdir(d) for d in dirs), timeout=30, what="the replicas' logs deleted")
    assert delete(topic) == "UNKNOWN_TOPIC_OR_PART"
    assert delete("__consumer_offsets") == "INVALID_REQUEST"

    def created():               # the name again, once the controller has heard from every replica's broker
        try:
            admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=30)[topic].result(30)
            return True
        except KafkaException as e:
            assert "marked for deletion" in str(e), e
            return False
    h.wait_for(created, timeout=30, what="the name free again")
    from tests.kafka_protocol.real_clients_support import _read_all
    p.produce(topic, b"new", partition=0)                                      # in an empty log, not the old one
    assert p.flush(30) == 0
    assert _read_all(boot, topic, 1, "read_uncommitted", expect=1) == ["new"]


def test_librdkafka_admin_creates_a_topic_with_its_own_replica_assignment_or_only_validates_it(kcluster):
    boot = kcluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})

    def create(name, assignment, validate_only=False):
        f = admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)], validate_only=validate_only,
                                operation_timeout=30)[name]
        return _outcome(f)

    def replicas(name):
        md = admin.list_topics(name, timeout=10).topics[name]
        return {p: list(pm.replicas) for p, pm in md.partitions.items()} if md.error is None else None
    name = f"manual-{uuid.uuid4().hex[:6]}"
    wanted = [[3, 1], [1, 2], [2, 3]]
    assert create(name, wanted, validate_only=True) == "ok"
    assert name not in admin.list_topics(timeout=10).topics                      # validated, not created
    assert create(name, wanted) == "ok"
    assert replicas(name) == {0: [3, 1], 1: [1, 2], 2: [2, 3]}                  # as asked, leader first
    assert {p: pm.leader for p, pm in admin.list_topics(name, timeout=10).topics[name].partitions.items()} == \
        {0: 3, 1: 1, 2: 2}
    other = f"manual-{uuid.uuid4().hex[:6]}"
    assert create(other, [[1, 1]]) == "INVALID_REPLICA_ASSIGNMENT"              # a broker twice
    assert create(other, [[1, 2], [3]]) == "INVALID_REPLICA_ASSIGNMENT"         # replica counts differ
    assert create(other, [[1, 9]]) == "INVALID_REPLICA_ASSIGNMENT"              # no broker 9
    assert other not in admin.list_topics(timeout=10).topics


def test_describe_cluster_names_the_brokers_and_a_broker_as_controller_as_metadata_does(kcluster):
    """KIP-700's DescribeCluster (Java's AdminClient.describeCluster; librdkafka asks Metadata instead)."""
    import socket
    from cluster.local_nodes import KAFKA_PORT
    from tests.kafka_protocol.test_listener import _read_frame, _request, _response
    md = AdminClient({"bootstrap.servers": kcluster.info().kafka_bootstrap}).list_topics(timeout=10)
    for node in kcluster.info().by_role("broker"):
        with socket.create_connection((node.host, KAFKA_PORT), timeout=10) as s:
            s.sendall(_request(60, 1, 4, include_cluster_authorized_operations=True, endpoint_type=1))
            corr, r = _response(_read_frame(s), 60, 1)
        assert corr == 4 and r.error_code.value == 0 and r.cluster_id == md.cluster_id
        assert sorted((b.broker_id, b.host, b.port) for b in r.brokers) == \
            sorted((b.id, b.host, b.port) for b in md.brokers.values())        # the brokers, no coordinator
        assert r.controller_id == node.node_id                                 # the broker that forwards
        assert r.cluster_authorized_operations & (1 << 8) and r.cluster_authorized_operations & (1 << 7)


def test_4_0_closes_the_connection_on_the_topic_and_offset_versions_kip_896_removed(kcluster):
    """OffsetCommit v0-v1, OffsetFetch v0, CreateTopics v0-v1, DeleteTopics v0 (older releases serve them:
    test_real_clients_old_releases): no answer, the connection closed, as Kafka 4.0's SocketServer does; the
    next version up is answered on a new connection."""
    import socket
    import struct
    pytest.importorskip("kafka.protocol.admin")
    from tests.kafka_protocol.test_legacy_versions import _frame, _old_group_and_topic_requests
    host, port = kcluster.info().kafka_bootstrap.split(",")[0].rsplit(":", 1)

    def answered(frame) -> bool:
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            try:
                return len(s.recv(4)) == 4                   # b"": closed without an answer
            except ConnectionResetError:
                return False
    for (key, version), req in _old_group_and_topic_requests().items():
        assert not answered(_frame(req, version)), (key, version)
    from kafka.protocol.admin import DeleteTopicsRequest
    assert answered(_frame(DeleteTopicsRequest[1](topic_names=["no-such-topic"], timeout_ms=1000), 1))
