"""The authorizer through real Kafka clients (librdkafka) against a real local cluster whose brokers run
Kafka's ZooKeeper ACL authorizer with allow.everyone.if.no.acl.found: ACLs created, described and deleted
through the Admin API, and enforced by every broker (each partition leader, the transaction relay, the
group coordinator) for the lab's clients, who are all User:ANONYMOUS on the PLAINTEXT listener."""
import time
import uuid

import pytest

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)
from tests.kafka_protocol.real_clients_support import _topic, start_kcluster  # noqa: E402

ANON = "User:ANONYMOUS"
AUTHORIZER = ["--authorizer-class-name=kafka.security.authorizer.AclAuthorizer",
              "--allow-everyone-if-no-acl-found=true"]


@pytest.fixture(scope="module")
def acl_cluster(eoslab_home):
    yield from start_kcluster(eoslab_home, "acl", AUTHORIZER)


def _acl(rtype, name, op, perm, principal=ANON):
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, perm)


def _create(admin, bindings):
    for f in admin.create_acls(bindings, request_timeout=30).values():
        f.result(30)


def _until(what, check, timeout_s=30.0):
    """Wait for `check()` to return a true value (the ACL change reaching every broker), at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            assert got, f"{what}: not within {timeout_s:.0f} s"
            return got
        time.sleep(0.2)


def _first_error(consumer, timeout_s=30.0):
    """The code of the first error the consumer's poll reports (None: none within timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error():
            return m.error().code()
    return None


def test_acls_are_created_described_and_deleted_through_the_admin_api(acl_cluster):
    admin = AdminClient({"bootstrap.servers": acl_cluster.info().kafka_bootstrap})
    topic = f"acl-crud-{uuid.uuid4().hex[:6]}"
    read = _acl(ResourceType.TOPIC, topic, AclOperation.READ, AclPermissionType.ALLOW, "User:alice")
    deny = _acl(ResourceType.TOPIC, topic, AclOperation.WRITE, AclPermissionType.DENY, "User:bob")
    prefixed = AclBinding(ResourceType.GROUP, topic[:8], ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
    _create(admin, [read, deny, prefixed])
    on_topic = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(on_topic, request_timeout=30).result(30)) == {read, deny}
    matching_group = AclBindingFilter(ResourceType.GROUP, topic, ResourcePatternType.MATCH, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching_group, request_timeout=30).result(30) == [prefixed]
    bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                           AclPermissionType.ANY)
    [(flt, fut)] = admin.delete_acls([bob], request_timeout=30).items()
    assert fut.result(30) == [deny]
    assert set(admin.describe_acls(on_topic, request_timeout=30).result(30)) == {read}
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, ANON, "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([bad], request_timeout=30)[bad].result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in e.value.args[0].str()


def test_an_allow_read_acl_narrows_the_topics_authorized_operations_to_read_and_describe(acl_cluster):
    boot = acl_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    topic = _topic(boot, "acl-ops")
    [desc] = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
    assert len(desc.result(30).authorized_operations) == 8          # no ACL: allow.everyone.if.no.acl.found
    _create(admin, [_acl(ResourceType.TOPIC, topic, AclOperation.READ, AclPermissionType.ALLOW)])

    def narrowed():
        [d] = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
        return set(d.result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    _until("READ and DESCRIBE only", narrowed)


def test_every_partition_leader_refuses_a_write_its_acls_deny(acl_cluster):
    boot = acl_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    topic = _topic(boot, "acl-deny", partitions=3)
    leaders = {p.id: p.leader for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()}
    assert len(set(leaders.values())) == 3, f"the test needs a leader on each broker: {leaders}"
    _create(admin, [_acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                    _acl(ResourceType.TOPIC, topic, AclOperation.WRITE, AclPermissionType.DENY)])

    def refused_everywhere():
        errors = {}
        p = Producer({"bootstrap.servers": boot, "message.timeout.ms": 10000, "retries": 0})
        for partition in leaders:
            p.produce(topic, b"v", partition=partition,
                      on_delivery=lambda err, msg: errors.__setitem__(msg.partition(), err and err.code()))
        p.flush(20)
        return all(errors.get(n) == KafkaError.TOPIC_AUTHORIZATION_FAILED for n in leaders)
    _until("TOPIC_AUTHORIZATION_FAILED from all three leaders", refused_everywhere)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"acl-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        from confluent_kafka import TopicPartition
        c.assign([TopicPartition(topic, 0, 0)])            # READ is neither allowed nor denied: denied
        assert _first_error(c) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_a_transactional_id_without_write_cannot_init_and_a_group_without_read_cannot_join(acl_cluster):
    boot = acl_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    tid, group = f"acl-tx-{uuid.uuid4().hex[:6]}", f"acl-g-{uuid.uuid4().hex[:6]}"
    topic = _topic(boot, "acl-g")
    _create(admin, [_acl(ResourceType.TRANSACTIONAL_ID, tid, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                    _acl(ResourceType.GROUP, group, AclOperation.DESCRIBE, AclPermissionType.ALLOW)])

    def txn_refused():
        p = Producer({"bootstrap.servers": boot, "transactional.id": tid})
        try:
            p.init_transactions(15)
        except KafkaException as e:
            return e.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return False
    _until("InitProducerId refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED", txn_refused, 60)
    c = Consumer({"bootstrap.servers": boot, "group.id": group})
    try:
        c.subscribe([topic])
        assert _first_error(c) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_a_commit_is_refused_for_the_topic_without_read_and_a_group_without_describe_is_not_described(acl_cluster):
    from confluent_kafka import TopicPartition
    boot = acl_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    closed, open_ = _topic(boot, "acl-closed"), _topic(boot, "acl-open")
    group, hidden = f"acl-c-{uuid.uuid4().hex[:6]}", f"acl-h-{uuid.uuid4().hex[:6]}"
    _create(admin, [_acl(ResourceType.TOPIC, closed, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                    _acl(ResourceType.GROUP, hidden, AclOperation.READ, AclPermissionType.DENY)])
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        def committed():
            try:
                got = c.commit(offsets=[TopicPartition(closed, 0, 5), TopicPartition(open_, 0, 7)],
                               asynchronous=False)
            except KafkaException as e:
                return e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and "partial"
            errors = {tp.topic: tp.error and tp.error.code() for tp in got}
            return errors == {closed: KafkaError.TOPIC_AUTHORIZATION_FAILED, open_: None} and "per partition"
        _until("the closed topic's offset refused", committed)
        got = c.committed([TopicPartition(open_, 0), TopicPartition(closed, 0)], 30)
        offsets = {tp.topic: (tp.offset, tp.error and tp.error.code()) for tp in got}
        assert offsets[open_] == (7, None)                   # the allowed topic's offset was stored
        assert offsets[closed][0] < 0                        # the refused one was not
    finally:
        c.close()
    [fut] = admin.describe_consumer_groups([hidden], request_timeout=30).values()
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_the_kafka_tool_stand_ins_create_grow_delete_topics_and_add_remove_acls(acl_cluster):
    """tools/kafka_tools.py (the kafka-topics.sh / kafka-acls.sh librdkafka's tests call) against the
    cluster: the options as librdkafka passes them, the effect seen through the Admin API."""
    import os
    import subprocess
    import sys
    boot = acl_cluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    topic = f"tools-{uuid.uuid4().hex[:6]}"

    def tool(*args):
        script = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "kafka_tools.py")
        r = subprocess.run([sys.executable, script, *args, "--bootstrap-server", boot],
                           capture_output=True, text=True, timeout=120)
        # the tool's own message, if any (librdkafka may log its own lines to stderr too)
        return r.returncode, "\n".join(x for x in r.stderr.splitlines() if x.startswith("Error: "))
    assert tool("topics", "--create", "--topic", topic, "--replication-factor", "1", "--partitions", "2",
                "--config", "cleanup.policy=compact") == (0, "")
    desc = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(desc.partitions) == 2 and len(desc.partitions[0].replicas) == 1
    assert tool("topics", "--alter", "--topic", topic, "--partitions", "4") == (0, "")
    _until("4 partitions", lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4)
    code, err = tool("topics", "--create", "--topic", topic, "--partitions", "1")
    assert code == 1 and "already exists" in err and "\n" not in err
    assert tool("acls", "--add", "--deny-principal", "User:*", "--operation", "All", "--deny-host", "*",
                "--topic", topic) == (0, "")
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert [(b.principal, b.host, b.operation, b.permission_type) for b in admin.describe_acls(flt).result(30)] == [
        ("User:*", "*", AclOperation.ALL, AclPermissionType.DENY)]
    assert tool("acls", "--remove", "--force", "--deny-principal", "User:*", "--operation", "All",
                "--deny-host", "*", "--topic", topic) == (0, "")
    assert admin.describe_acls(flt).result(30) == []
    assert tool("topics", "--delete", "--topic", topic) == (0, "")
    _until("the topic gone", lambda: topic not in admin.list_topics(timeout=10).topics)
