"""The consumer group protocol (KIP-848) with librdkafka's `group.protocol=consumer` on a 4.0 cluster:
members split a topic's partitions by the coordinator's assignment, a member that leaves or crashes
hands its partitions to the others, a read-process-write copier commits its offsets in its
transactions, a zombie member's transactional commit is refused, a member consumes on through its
group coordinator's failover (the group loaded from __consumer_offsets), and a 3.6 cluster does not offer
the protocol at all."""
import json
import logging
import os
import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests import helpers as h
from tests.kafka_protocol.real_clients_support import _read_all, _topic
from tests.kafka_protocol.test_hanging_toolkit import send

pytestmark = pytest.mark.integration


def consumer(boot, group, **extra):
    return Consumer({"bootstrap.servers": boot, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def owned(*consumers):
    for c in consumers:
        c.poll(0.05)
    return [sorted(p.partition for p in c.assignment()) for c in consumers]


def split(*consumers, partitions=4):
    """The consumers' assignments once together they hold every partition exactly once, else None."""
    now = owned(*consumers)
    flat = [p for a in now for p in a]
    return now if sorted(flat) == list(range(partitions)) and all(now) else None


def test_two_members_split_the_partitions_and_one_that_leaves_hands_them_over(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic, group = _topic(boot, "kip848", partitions=4), f"g-{uuid.uuid4().hex[:6]}"
    a, b = consumer(boot, group, **{"client.id": "a"}), consumer(boot, group, **{"client.id": "b"})
    try:
        a.subscribe([topic])
        h.wait_for(lambda: owned(a) == [[0, 1, 2, 3]], timeout=60, what="the first member holding all four")
        b.subscribe([topic])
        first, second = h.wait_for(lambda: split(a, b), timeout=60, what="two members splitting four partitions")
        assert len(first) == 2 and len(second) == 2
        b.close()                                          # leaves: member epoch -1
        h.wait_for(lambda: owned(a) == [[0, 1, 2, 3]], timeout=30, what="the remaining member holding all four")
    finally:
        a.close()


def test_range_asked_for_by_the_members_is_used_and_an_admin_describes_the_group(kcluster):
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient
    boot = kcluster.info().kafka_bootstrap
    topic, group = _topic(boot, "kip848range", partitions=4), f"g-{uuid.uuid4().hex[:6]}"
    a, b = (consumer(boot, group, **{"client.id": n, "group.remote.assignor": "range"}) for n in ("a", "b"))
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        got = h.wait_for(lambda: split(a, b), timeout=60, what="two members splitting four partitions")
        assert sorted(got) == [[0, 1], [2, 3]]                  # range: contiguous halves
        admin = AdminClient({"bootstrap.servers": boot})

        def described():
            d = admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)
            return d if d.state == ConsumerGroupState.STABLE and len(d.members) == 2 else None
        d = h.wait_for(described, timeout=30, what="the group described Stable with two members")
        assert d.partition_assignor == "range"
        assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members) == \
            [[0, 1], [2, 3]]
    finally:
        a.close()
        b.close()


def test_a_static_member_that_restarts_comes_back_to_its_partitions(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic, group = _topic(boot, "kip848static", partitions=4), f"g-{uuid.uuid4().hex[:6]}"
    a = consumer(boot, group, **{"group.instance.id": "pod-a"})
    b = consumer(boot, group, **{"group.instance.id": "pod-b"})
    b2 = None
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        before_a, before_b = h.wait_for(lambda: split(a, b), timeout=60, what="two static members splitting four")
        b.close()                                          # a static member leaves with epoch -2
        first = boot.split(",")[0]
        at = h.wait_for(lambda: (lambda c: f"{c.host}:{c.port}" if c.error_code.value == 0 else None)(
            send(first, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]), timeout=30, what="coordinator")

        def epochs():
            [d] = send(at, 69, 0, group_ids=[group], include_authorized_operations=False).groups
            return sorted((m.instance_id, m.member_epoch) for m in d.members)
        h.wait_for(lambda: epochs()[1] == ("pod-b", -2), timeout=30, what="pod-b's place kept at epoch -2")
        assert owned(a) == [before_a]
        b2 = consumer(boot, group, **{"group.instance.id": "pod-b"})
        b2.subscribe([topic])
        h.wait_for(lambda: split(a, b2) == [before_a, before_b], timeout=60,
                   what="the restarted member back on its own partitions")
    finally:
        a.close()
        if b2 is not None:
            b2.close()


def test_a_crashed_member_is_fenced_at_its_session_timeout_and_the_other_gets_its_partitions(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic, group = _topic(boot, "kip848crash", partitions=4), f"g-{uuid.uuid4().hex[:6]}"
    child = subprocess.Popen([sys.executable, "-m", "tests.kafka_protocol.kip848_member", boot, topic, group],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    a = consumer(boot, group, **{"client.id": "survivor"})
    try:
        h.wait_for(lambda: json.loads(child.stdout.readline()) == [0, 1, 2, 3], timeout=60,
                   what="the child holding all four")
        a.subscribe([topic])
        h.wait_for(lambda: len(owned(a)[0]) == 2, timeout=60, what="the survivor holding two")
        os.kill(child.pid, signal.SIGKILL)                # no leave: only the session timeout removes it
        child.wait(10)
        h.wait_for(lambda: owned(a) == [[0, 1, 2, 3]], timeout=60, what="the survivor holding all four")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        a.close()


def test_a_transactional_copier_commits_its_offsets_and_a_zombie_s_commit_is_refused(kcluster):
    boot = kcluster.info().kafka_bootstrap
    src, dst = _topic(boot, "kip848src", partitions=2), _topic(boot, "kip848dst", partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": boot})
    for i in range(20):
        p.produce(src, str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = consumer(boot, group, **{"isolation.level": "read_committed"})
    c.subscribe([src])
    tx = Producer({"bootstrap.servers": boot, "transactional.id": f"copier-{uuid.uuid4().hex[:6]}"})
    tx.init_transactions(30)
    copied, closed = 0, False
    try:
        def copy_some():
            nonlocal copied
            msgs = [m for m in c.consume(10, 0.5) if not m.error()]
            if not msgs:
                return copied >= 20
            tx.begin_transaction()
            for m in msgs:
                tx.produce(dst, m.value(), partition=0)
            tx.send_offsets_to_transaction([TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs],
                                           c.consumer_group_metadata(), 30)
            tx.commit_transaction(30)
            copied += len(msgs)
            return copied >= 20
        h.wait_for(copy_some, timeout=90, what="twenty records copied")
        committed = {tp.partition: tp.offset for tp in c.committed([TopicPartition(src, 0), TopicPartition(src, 1)],
                                                                   timeout=30)}
        assert committed == {0: 10, 1: 10}
        assert sorted(int(v) for v in _read_all(boot, dst, 1, "read_committed", 20)) == list(range(20))

        zombie = c.consumer_group_metadata()              # this member at its epoch now
        d = consumer(boot, group)
        d.subscribe([src])                                 # a second member: the first moves to a new epoch
        try:
            h.wait_for(lambda: split(c, d, partitions=2), timeout=60, what="the copier sharing with a newcomer")
            tx.begin_transaction()
            with pytest.raises(KafkaException) as refused:
                tx.send_offsets_to_transaction([TopicPartition(src, 0, 0)], zombie, 30)
            assert refused.value.args[0].name() == "ILLEGAL_GENERATION", refused.value.args[0]   # a stale epoch
            tx.abort_transaction(30)
        finally:
            d.close()
        c.close()
        closed = True
        check = Consumer({"bootstrap.servers": boot, "group.id": group})
        again = {tp.partition: tp.offset for tp in check.committed([TopicPartition(src, 0)], timeout=30)}
        check.close()
        assert again == {0: 10}                            # the zombie did not move the group's offset back
    finally:
        if not closed:
            c.close()


def test_a_3_6_cluster_does_not_offer_consumer_group_heartbeat(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, broker_args=["--kafka-version=3.6"],
                      txn_coordinator_args=["--kafka-version=3.6"])
    boot = rt.info().kafka_bootstrap.split(",")[0]
    keys = {k.api_key: (k.min_version, k.max_version) for k in send(boot, 18, 3, client_software_name="t",
                                                                   client_software_version="1").api_keys}
    assert 68 not in keys and 69 not in keys and keys[8][1] == 8
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    log = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:6]}")
    log.addHandler(Collect())
    log.setLevel(logging.DEBUG)
    topic = f"kip848old-{uuid.uuid4().hex[:6]}"
    c = consumer(boot, f"g-{uuid.uuid4().hex[:6]}", debug="cgrp", logger=log)
    try:
        c.subscribe([topic])
        h.wait_for(lambda: c.poll(0.1) is None and any("ConsumerGroupHeartbeatRequest not supported by broker" in ln
                                                       for ln in lines),
                   timeout=60, what="librdkafka finding no ConsumerGroupHeartbeat on the 3.6 brokers")
        assert not c.assignment()
    finally:
        c.close()


def test_a_coordinator_failover_keeps_the_group_so_its_member_consumes_on_without_rejoining(make_cluster):
    """The group's coordinator broker is killed: the broker that takes its __consumer_offsets partition over
    loads the group from it (Kafka's GroupMetadataManager replay), so the member's heartbeats at its epoch
    are accepted there: it keeps its partitions and its position (no rejoin at epoch 1, no records read again
    from the last commit) and its commits at its epoch pass."""
    rt = make_cluster(brokers=3, controllers=1)
    boot = rt.info().kafka_bootstrap
    brokers = {n.node_id: n for n in rt.info().nodes if n.role == "broker"}
    topic, group = _topic(boot, "kip848move", partitions=4), f"g-{uuid.uuid4().hex[:6]}"

    def coordinator(ask):
        c = send(ask, 10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]
        return (c.node_id, f"{c.host}:{c.port}") if c.error_code.value == 0 else None

    def described(ask):
        at = coordinator(ask)
        if at is None:
            return None
        [d] = send(at[1], 69, 0, group_ids=[group], include_authorized_operations=False).groups
        return (d.group_epoch, sorted((m.member_id, m.member_epoch) for m in d.members)) if d.error_code.value == 0 \
            else None

    a, b = consumer(boot, group, **{"client.id": "a"}), consumer(boot, group, **{"client.id": "b"})
    producer = Producer({"bootstrap.servers": boot, "acks": "all"})
    seen = []

    def take():
        m = a.poll(0.1)
        if m is not None and m.error() is None:
            seen.append(m.value().decode())
        return m

    def produce(values):
        for v in values:
            producer.produce(topic, value=v.encode(), partition=int(v) % 4)
        producer.flush(30)
    try:
        a.subscribe([topic])
        h.wait_for(lambda: owned(a) == [[0, 1, 2, 3]], timeout=60, what="the first member holding all four")
        b.subscribe([topic])
        h.wait_for(lambda: split(a, b), timeout=60, what="two members splitting four partitions")
        b.close()                                                 # the group epoch moves on to 3
        h.wait_for(lambda: owned(a) == [[0, 1, 2, 3]], timeout=30, what="the remaining member holding all four")
        first = boot.split(",")[0]
        before = h.wait_for(lambda: described(first), timeout=30, what="the group described")
        assert before[0] >= 3 and len(before[1]) == 1
        produce([str(i) for i in range(40)])
        h.wait_for(lambda: take() is None and len(seen) == 40, timeout=60, what="the first 40 records read")
        # commit each partition two records short of its position: a member that rejoined would read those again
        a.commit(offsets=[TopicPartition(topic, p.partition, p.offset - 2) for p in a.position(a.assignment())],
                 asynchronous=False)
        node, _ = coordinator(first)
        rt.kill(brokers[node].name)                               # the coordinator dies; another leads the partition
        alive = next(addr for addr in boot.split(",") if addr.rsplit(":", 1)[0] != brokers[node].host)
        produce([str(i) for i in range(40, 80)])
        h.wait_for(lambda: take() is None and len(seen) >= 80, timeout=90, what="the next 40 records read")
        after = h.wait_for(lambda: (lambda d: d if d and coordinator(alive)[0] != node else None)(described(alive)),
                           timeout=30, what="the group described by its new coordinator")
        assert after == before, "the new coordinator lost the group: its member rejoined"
        assert sorted(seen, key=int) == [str(i) for i in range(80)], "records read again after the failover"
        a.commit(asynchronous=False)                              # a commit at the member's epoch passes there
    finally:
        a.close()
        producer.flush(10)
