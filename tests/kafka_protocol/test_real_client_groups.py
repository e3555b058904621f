"""Consumer groups of real clients on the classic protocol: librdkafka's cooperative-sticky assignor
(KIP-429, which needs each member's owned partitions to reach the leader) shares a topic between
members that join one after another, and a group of another protocol type (Kafka Connect's "connect")
gets its members' metadata and its leader's assignments back byte for byte."""
import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer

from tests.kafka_protocol.real_clients_support import _topic
from tests.kafka_protocol.test_hanging_toolkit import send

pytestmark = pytest.mark.integration


def test_librdkafka_cooperative_sticky_members_share_a_topic_and_read_every_record(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "coop", partitions=4)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    for i in range(400):
        p.produce(topic, str(i).encode(), partition=i % 4)
    assert p.flush(30) == 0
    child = subprocess.run([sys.executable, "-m", "tests.kafka_protocol.coop_consumers", boot, topic,
                            f"g-{uuid.uuid4().hex[:6]}", "cooperative-sticky", "2", "400"],
                           capture_output=True, text=True, timeout=150)
    assert child.returncode == 0, f"the consumers' process ended {child.returncode}: {child.stderr[-2000:]}"
    out = json.loads(child.stdout.strip().splitlines()[-1])
    first, second = out["assignments"]
    assert first and second and sorted(first + second) == [0, 1, 2, 3], out    # shared, no overlap
    assert out["read"] == 400, out


def test_a_connect_group_gets_its_bytes_back_untouched_over_the_kafka_wire(kcluster):
    boot = kcluster.info().kafka_bootstrap.split(",")[0]
    group = f"connect-{uuid.uuid4().hex[:6]}"

    def coordinator():
        c = send(boot, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]
        return f"{c.host}:{c.port}" if c.error_code.value == 0 else None
    from tests import helpers as h
    at = h.wait_for(coordinator, timeout=60, what="the group's coordinator")
    worker_state = b'\x00\x01{"url":"http://worker-1:8083","configOffset":7}'   # Connect's own encoding
    j = send(at, 11, 7, group_id=group, session_timeout=10000, rebalance_timeout=10000, member_id="",
             group_instance_id=None, protocol_type="connect",
             protocols=[{"name": "sessioned", "metadata": worker_state}, {"name": "default", "metadata": b"x"}])
    if j.error_code.value == 79:        # MEMBER_ID_REQUIRED (KIP-394): join again with the id given
        j = send(at, 11, 7, group_id=group, session_timeout=10000, rebalance_timeout=10000,
                 member_id=j.member_id, group_instance_id=None, protocol_type="connect",
                 protocols=[{"name": "sessioned", "metadata": worker_state}, {"name": "default", "metadata": b"x"}])
    assert j.error_code.value == 0, j.error_code
    assert (j.protocol_type, j.protocol_name, j.leader) == ("connect", "sessioned", j.member_id)
    assert [bytes(m.metadata) for m in j.members] == [worker_state]
    assignment = b'\x00\x01\x00\x00{"leader":"w1","tasks":["sink-0"]}'
    s = send(at, 14, 5, group_id=group, generation_id=j.generation_id, member_id=j.member_id,
             group_instance_id=None, protocol_type="connect", protocol_name="sessioned",
             assignments=[{"member_id": j.member_id, "assignment": assignment}])
    assert s.error_code.value == 0, s.error_code
    assert (bytes(s.assignment), s.protocol_type, s.protocol_name) == (assignment, "connect", "sessioned")


def test_a_commit_naming_an_unknown_topic_or_partition_is_refused_for_those_partitions_only(kcluster):
    boot = kcluster.info().kafka_bootstrap
    known = _topic(boot, "known", partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = boot.split(",")[0]
    from tests import helpers as h
    at = h.wait_for(lambda: (lambda c: f"{c.host}:{c.port}" if c.error_code.value == 0 else None)(
        send(first, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]), timeout=60, what="coordinator")

    def commit():
        r = send(at, 8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                 topics=[{"name": n, "partitions": [{"partition_index": p, "committed_offset": 5,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}
                                                    for p in ps]}
                         for n, ps in ((known, [0, 7]), (f"never-{uuid.uuid4().hex[:6]}", [0]))])
        return [(t.name == known, p.partition_index, p.error_code.value) for t in r.topics for p in t.partitions]
    answers = h.wait_for(lambda: (lambda a: a if a[0][2] == 0 else None)(commit()), timeout=30,
                         what="the known partition's commit")             # the coordinator's metadata may lag
    assert answers == [(True, 0, 0), (True, 7, 3), (False, 0, 3)]      # 3: UNKNOWN_TOPIC_OR_PARTITION
    f = send(at, 9, 7, group_id=group, require_stable=False, topics=[{"name": known, "partition_indexes": [0, 7]}])
    assert [(p.partition_index, p.committed_offset) for p in f.topics[0].partitions] == [(0, 5), (7, -1)]


def test_librdkafka_admin_lists_and_describes_a_group_as_its_coordinator_holds_it(kcluster):
    from confluent_kafka import Consumer, ConsumerGroupState
    from confluent_kafka.admin import AdminClient
    from tests import helpers as h
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "listed", partitions=2)
    group, committed_only = f"g-{uuid.uuid4().hex[:6]}", f"offsets-{uuid.uuid4().hex[:6]}"
    member = Consumer({"bootstrap.servers": boot, "group.id": group, "client.id": "lister-test",
                       "session.timeout.ms": 10000})
    member.subscribe([topic])
    h.wait_for(lambda: member.poll(0.1) is None and member.assignment(), timeout=60, what="the member's assignment")
    from confluent_kafka import TopicPartition
    standalone = Consumer({"bootstrap.servers": boot, "group.id": committed_only})
    standalone.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    standalone.close()
    admin = AdminClient({"bootstrap.servers": boot})
    try:
        def listed():
            result = admin.list_consumer_groups(request_timeout=20).result(30)
            states = {g.group_id: g.state for g in result.valid}
            return (states, result.errors) if group in states and committed_only in states else None
        states, errors = h.wait_for(listed, timeout=60, what="both groups listed")
        assert not errors, errors
        assert states[group] == ConsumerGroupState.STABLE and states[committed_only] == ConsumerGroupState.EMPTY
        unknown = f"never-{uuid.uuid4().hex[:6]}"
        described = {g: f.result(30) for g, f in admin.describe_consumer_groups([group, unknown],
                                                                              request_timeout=20).items()}
        d = described[group]
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range"
        assert [m.client_id for m in d.members] == ["lister-test"]
        assert sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == [0, 1]
        assert described[unknown].state == ConsumerGroupState.DEAD and not described[unknown].members
    finally:
        member.close()


def test_librdkafka_static_member_restarts_into_its_assignment_without_a_rebalance(kcluster):
    from confluent_kafka import Consumer
    from tests import helpers as h
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "static", partitions=4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    revoked = []

    def member(instance, on_revoke=None):
        c = Consumer({"bootstrap.servers": boot, "group.id": group, "group.instance.id": instance,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
        c.subscribe([topic], on_revoke=on_revoke or (lambda *_: None))
        return c

    def assigned(*consumers):
        for c in consumers:
            c.poll(0.1)
        return all(c.assignment() for c in consumers) and \
            sum(len(c.assignment()) for c in consumers) == 4
    a = member("pod-a", on_revoke=lambda c, parts: revoked.append([p.partition for p in parts]))
    b = member("pod-b")
    h.wait_for(lambda: assigned(a, b) and len(a.assignment()) == 2, timeout=60, what="the group settled: 2 and 2")
    before_a, before_b = sorted(p.partition for p in a.assignment()), sorted(p.partition for p in b.assignment())
    revoked.clear()
    b.close()                                     # a static member's close sends no LeaveGroup
    b2 = member("pod-b")                          # the same pod, restarted
    h.wait_for(lambda: assigned(a, b2), timeout=60, what="the restarted member assigned")
    try:
        assert sorted(p.partition for p in b2.assignment()) == before_b
        for _ in range(20):                       # and the other member kept its partitions throughout
            a.poll(0.1)
        assert revoked == [] and sorted(p.partition for p in a.assignment()) == before_a
    finally:
        a.close()
        b2.close()
