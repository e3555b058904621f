"""Group and ACL administration through real Kafka clients (librdkafka's AdminClient, kafka-python's
KafkaAdminClient) against a real local cluster: DeleteGroups and OffsetDelete as Kafka's group coordinator
answers them, and the ACL requests as a Kafka broker without an authorizer answers them."""
import time
import uuid

import pytest

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)
from tests.kafka_protocol.real_clients_support import _topic  # noqa: E402
from tests.kafka_protocol.test_real_clients_admin import _outcome  # noqa: E402


def _commit(boot, group, topic, offsets: dict[int, int]) -> None:
    """Offsets committed by a consumer that assigns itself the partitions (a group without members)."""
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _committed(admin, group, topic, partitions) -> dict[int, int]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    got = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in got.topic_partitions if tp.offset >= 0}


def test_librdkafka_deletes_an_empty_group_and_its_offsets_but_not_a_group_with_a_member(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "dg", partitions=2)
    admin = AdminClient({"bootstrap.servers": boot})
    empty, busy = f"dg-empty-{uuid.uuid4().hex[:6]}", f"dg-busy-{uuid.uuid4().hex[:6]}"
    _commit(boot, empty, topic, {0: 3, 1: 4})
    assert _committed(admin, empty, topic, [0, 1]) == {0: 3, 1: 4}
    member = Consumer({"bootstrap.servers": boot, "group.id": busy, "session.timeout.ms": 6000})
    member.subscribe([topic])
    try:
        t0 = time.monotonic()
        while not member.assignment() and time.monotonic() - t0 < 60:
            member.poll(0.2)
        assert member.assignment(), "the member never got its partitions"
        fs = admin.delete_consumer_groups([empty, busy, "dg-never-there"], request_timeout=30)
        outcome = {g: _outcome(f) for g, f in fs.items()}
        assert outcome == {empty: "ok", busy: "NON_EMPTY_GROUP", "dg-never-there": "GROUP_ID_NOT_FOUND"}
    finally:
        member.close()
    assert _committed(admin, empty, topic, [0, 1]) == {}
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert empty not in listed
    assert _outcome(admin.delete_consumer_groups([empty], request_timeout=30)[empty]) == "GROUP_ID_NOT_FOUND"


def test_kafka_python_deletes_the_offsets_of_one_partition_and_is_refused_a_subscribed_topic(kcluster):
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "od", partitions=2)
    group = f"od-{uuid.uuid4().hex[:6]}"
    _commit(boot, group, topic, {0: 7, 1: 8})
    admin = KafkaAdminClient(bootstrap_servers=boot.split(","))
    try:
        result = admin.delete_group_offsets(group, [KTP(topic, 0)])
        assert {(tp.partition, err.__name__) for tp, err in result.items()} == {(0, "NoError")}   # error classes
        assert _committed(AdminClient({"bootstrap.servers": boot}), group, topic, [0, 1]) == {1: 8}
    finally:
        admin.close()


def test_acl_requests_are_answered_security_disabled_as_by_a_broker_without_an_authorizer(kcluster):
    boot = kcluster.info().kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    binding = AclBinding(ResourceType.TOPIC, "acl-topic", ResourcePatternType.LITERAL, "User:test1", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    assert _outcome(admin.create_acls([binding], request_timeout=30)[binding]) == "SECURITY_DISABLED"
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert admin.describe_acls(flt, request_timeout=30).result(30) == []    # librdkafka drops DescribeAcls' error
    assert _outcome(admin.delete_acls([flt], request_timeout=30)[flt]) == "SECURITY_DISABLED"
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType, ResourceType as KResourceType
    kadmin = KafkaAdminClient(bootstrap_servers=boot.split(","))
    try:
        acls, err = kadmin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                                   ResourcePatternFilter(KResourceType.ANY, None,
                                                                         ACLResourcePatternType.ANY)))
    except Exception as e:  # noqa: BLE001 - kafka-python raises the broker's error
        acls, err = [], e
    finally:
        kadmin.close()
    assert acls == [] and "SecurityDisabled" in type(err).__name__ + getattr(err, "__name__", "")


def test_librdkafka_is_told_every_operation_is_authorized_on_a_topic_a_group_and_the_cluster(kcluster):
    """With no authorizer Kafka reports every operation the resource type supports (AclEntry)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ops")
    group = f"ops-{uuid.uuid4().hex[:6]}"
    _commit(boot, group, topic, {0: 1})
    admin = AdminClient({"bootstrap.servers": boot})
    [desc] = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
    assert set(desc.result(30).authorized_operations) == {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE,
                                                          Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    [g] = admin.describe_consumer_groups([group], include_authorized_operations=True).values()
    assert set(g.result(30).authorized_operations) == {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS,
                                                       Op.ALTER_CONFIGS}       # 4.0: the group configs' two
    [plain] = admin.describe_consumer_groups([group]).values()
    assert not plain.result(30).authorized_operations                        # not asked for: none reported


def test_librdkafka_lists_groups_by_their_kip_848_type(kcluster):
    """ListGroups v5: each group's type (classic here: a group known by its committed offsets) and the
    types filter; librdkafka asks v5 of a 4.0 broker and reports the type it is told."""
    from confluent_kafka import ConsumerGroupType
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "lt")
    group = f"lt-{uuid.uuid4().hex[:6]}"
    _commit(boot, group, topic, {0: 1})
    admin = AdminClient({"bootstrap.servers": boot})
    classic = {g.group_id: g.type for g in admin.list_consumer_groups(
        types={ConsumerGroupType.CLASSIC}).result(30).valid}
    assert classic.get(group) == ConsumerGroupType.CLASSIC
    consumer = {g.group_id for g in admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30).valid}
    assert group not in consumer


def test_librdkafka_is_refused_commit_metadata_over_offset_metadata_max_bytes_on_that_partition(kcluster):
    """offset.metadata.max.bytes (4096): the partition with too much metadata is OFFSET_METADATA_TOO_LARGE and
    gets no offset; the commit's other partition is committed. (The exact bound is in
    tests/unit/test_offset_metadata_limit.py: confluent-kafka sends a metadata string with its C terminator,
    one character more than given.)"""
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "md", partitions=2)
    group = f"md-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        with pytest.raises(confluent_kafka.KafkaException) as e:    # librdkafka reports a partition's error
            c.commit(offsets=[TopicPartition(topic, 0, 5, metadata="m" * 100),
                              TopicPartition(topic, 1, 7, metadata="m" * 5000)], asynchronous=False)
        assert e.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_METADATA_TOO_LARGE
    finally:
        c.close()
    assert _committed(AdminClient({"bootstrap.servers": boot}), group, topic, [0, 1]) == {0: 5}
