"""Real Kafka clients (librdkafka through confluent-kafka, kafka-python, aiokafka) against a real local
cluster over the brokers' and coordinators' Kafka listeners."""
import asyncio
import os
import time
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def kcluster(eoslab_home):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-kp-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1)
    rt.up()
    yield rt
    rt.down()


def _topic(boot: str, name: str, partitions: int = 1) -> str:
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})    # kept until the result: its handle serves the future
    for f in admin.create_topics([NewTopic(name, partitions, 3)], operation_timeout=30).values():
        f.result(30)
    return name


def _read_all(boot, topic, partitions, isolation, expect, timeout_s=20.0):
    c = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, deadline = [], time.monotonic() + timeout_s
    quiet_until = None
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            if len(got) >= expect:
                quiet_until = quiet_until or time.monotonic() + 1.0   # nothing more may come after
                if time.monotonic() > quiet_until:
                    break
            continue
        got.append(m.value().decode())
    c.close()
    return got


def test_confluent_kafka_idempotent_produce_reads_back_exactly_once(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-idem", 2)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(300):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(),
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []
    got = _read_all(boot, topic, 2, "read_uncommitted", 300)
    assert sorted(got) == sorted(f"v{i}" for i in range(300))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_writes_every_codec_and_reads_it_back(kcluster, codec):
    """librdkafka compresses the batches it sends; the broker reads each of Kafka's codecs (it used to
    refuse all but gzip with UNSUPPORTED_COMPRESSION_TYPE)."""
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, f"ck-{codec}")
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "compression.type": codec,
                  "linger.ms": 20})
    errors = []
    for i in range(200):
        p.produce(topic, value=f"v{i}-".encode() + b"x" * 200,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []
    got = _read_all(boot, topic, 1, "read_uncommitted", 200)
    assert got == [f"v{i}-" + "x" * 200 for i in range(200)]


def test_record_headers_come_back_as_sent_to_librdkafka_and_kafka_python_in_a_transaction(kcluster):
    """librdkafka writes headers (tracing, Streams' and Connect's metadata); the broker used to refuse the
    batch with INVALID_RECORD. Written in a transaction, read at read_committed by two clients."""
    kafka = pytest.importorskip("kafka")
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-headers")
    sent = [[("trace-id", f"t{i}".encode()), ("empty", None), ("trace-id", b"again")] if i % 3 else []
            for i in range(30)]
    p = Producer({"bootstrap.servers": boot, "transactional.id": f"hd-{uuid.uuid4().hex[:6]}",
                  "compression.type": "lz4", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i, hs in enumerate(sent):
        p.produce(topic, value=f"v{i}".encode(), headers=hs or None)
    p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    while len(got) < 30 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.value().decode(), m.headers() or []))
    c.close()
    assert got == [(f"v{i}", hs) for i, hs in enumerate(sent)]
    kc = kafka.KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, consumer_timeout_ms=3000,
                             isolation_level="read_committed")
    kc.assign([kafka.TopicPartition(topic, 0)])
    kc.seek_to_beginning()
    kp_got = [(m.value.decode(), [(k, v) for k, v in m.headers]) for m in kc]
    kc.close()
    assert kp_got == [(f"v{i}", hs) for i, hs in enumerate(sent)]


def test_confluent_kafka_lost_ack_is_retried_into_one_copy(kcluster):
    info = kcluster.info()
    boot = info.kafka_bootstrap
    topic = _topic(boot, "ck-lost")
    from clients.metadata import ClusterMetadata
    leader = h.leader_address(ClusterMetadata(info.bootstrap), topic)
    h.drop_responses(leader, topic, count=1)
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
                  "request.timeout.ms": 2000, "linger.ms": 50})
    for i in range(20):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(30) == 0
    assert h.faults_applied(leader) == 1
    got = _read_all(boot, topic, 1, "read_uncommitted", 20)
    assert got == [f"v{i}" for i in range(20)]


def test_confluent_kafka_read_committed_sees_only_committed_transactions(kcluster):
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-txn")
    p = Producer({"bootstrap.servers": boot, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    for kind, n in (("c", 10), ("a", 7), ("d", 5)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=f"{kind}{i}".encode())
        if kind == "a":
            p.flush(10)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    committed = [f"c{i}" for i in range(10)] + [f"d{i}" for i in range(5)]
    assert _read_all(boot, topic, 1, "read_committed", 15) == committed
    everything = _read_all(boot, topic, 1, "read_uncommitted", 22)
    assert everything == [f"c{i}" for i in range(10)] + [f"a{i}" for i in range(7)] + [f"d{i}" for i in range(5)]


def test_confluent_kafka_copier_commits_offsets_inside_the_transaction(kcluster):
    boot = kcluster.info().kafka_bootstrap
    src, dst = _topic(boot, "ck-in", 2), _topic(boot, "ck-out")
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    for i in range(60):
        p.produce(src, key=str(i).encode(), value=f"m{i}".encode())
    assert p.flush(30) == 0
    group = f"copier-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe([src])
    tp = Producer({"bootstrap.servers": boot, "transactional.id": f"copier-{uuid.uuid4().hex[:6]}"})
    tp.init_transactions(30)
    copied, deadline = 0, time.monotonic() + 60
    while copied < 60 and time.monotonic() < deadline:
        msgs = [m for m in c.consume(25, 1.0) if not m.error()]
        if not msgs:
            continue
        tp.begin_transaction()
        for m in msgs:
            tp.produce(dst, value=m.value())
        tp.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        tp.commit_transaction(30)
        copied += len(msgs)
    c.close()
    assert copied == 60
    check = Consumer({"bootstrap.servers": boot, "group.id": group})
    offsets = check.committed([TopicPartition(src, 0), TopicPartition(src, 1)], 10)
    check.close()
    assert sum(o.offset for o in offsets) == 60
    assert sorted(_read_all(boot, dst, 1, "read_committed", 60)) == sorted(f"m{i}" for i in range(60))


def test_kafka_python_idempotent_produce_reads_back_exactly_once(kcluster):
    kafka = pytest.importorskip("kafka")
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "kp-idem", 2)
    p = kafka.KafkaProducer(bootstrap_servers=boot, enable_idempotence=True, acks="all")
    try:
        futures = [p.send(topic, key=str(i).encode(), value=f"v{i}".encode()) for i in range(200)]
        p.flush(30)
        assert all(f.get(10).offset >= 0 for f in futures)
    finally:
        p.close(5)
    c = kafka.KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, consumer_timeout_ms=3000,
                            isolation_level="read_committed")
    c.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
    c.seek_to_beginning()
    got = [m.value.decode() for m in c]
    c.close()
    assert sorted(got) == sorted(f"v{i}" for i in range(200))


def test_aiokafka_idempotent_produce_reads_back_exactly_once(kcluster):
    aiokafka = pytest.importorskip("aiokafka")
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ak-idem")

    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=boot, enable_idempotence=True, acks="all")
        await p.start()
        try:
            for i in range(100):
                await p.send(topic, f"v{i}".encode())
            await p.flush()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False,
                                      isolation_level="read_committed")
        await c.start()
        got = []
        try:
            c.assign([aiokafka.TopicPartition(topic, 0)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + 20
            while len(got) < 100 and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got += [m.value.decode() for m in msgs]
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == [f"v{i}" for i in range(100)]


def _kp_read(kafka, boot, topic, isolation):
    c = kafka.KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, consumer_timeout_ms=3000,
                            isolation_level=isolation)
    c.assign([kafka.TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = [m.value.decode() for m in c]
    c.close()
    return got


def test_kafka_python_read_committed_sees_only_committed_transactions(kcluster):
    kafka = pytest.importorskip("kafka")
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "kp-txn")
    p = kafka.KafkaProducer(bootstrap_servers=boot, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        p.init_transactions()
        for kind, n in (("c", 6), ("a", 4), ("d", 3)):
            p.begin_transaction()
            for i in range(n):
                p.send(topic, f"{kind}{i}".encode())
            if kind == "a":
                p.flush()
                p.abort_transaction()
            else:
                p.commit_transaction()
    finally:
        p.close(5)
    assert _kp_read(kafka, boot, topic, "read_committed") == [f"c{i}" for i in range(6)] + [f"d{i}" for i in range(3)]
    assert len(_kp_read(kafka, boot, topic, "read_uncommitted")) == 13


def test_kafka_python_copier_commits_offsets_inside_the_transaction(kcluster):
    kafka = pytest.importorskip("kafka")
    boot = kcluster.info().kafka_bootstrap
    src, dst = _topic(boot, "kp-in"), _topic(boot, "kp-out")
    p = kafka.KafkaProducer(bootstrap_servers=boot, enable_idempotence=True)
    try:
        for i in range(30):
            p.send(src, f"m{i}".encode())
        p.flush(30)
    finally:
        p.close(5)
    group = f"kp-copier-{uuid.uuid4().hex[:6]}"
    c = kafka.KafkaConsumer(src, bootstrap_servers=boot, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", isolation_level="read_committed")
    tp = kafka.KafkaProducer(bootstrap_servers=boot, transactional_id=f"kp-copier-{uuid.uuid4().hex[:6]}")
    copied, deadline = 0, time.monotonic() + 60
    try:
        tp.init_transactions()
        while copied < 30 and time.monotonic() < deadline:
            batches = c.poll(timeout_ms=1000)
            msgs = [m for ms in batches.values() for m in ms]
            if not msgs:
                continue
            tp.begin_transaction()
            for m in msgs:
                tp.send(dst, m.value)
            offsets = {tpart: kafka.OffsetAndMetadata(ms[-1].offset + 1, "", -1) for tpart, ms in batches.items()}
            tp.send_offsets_to_transaction(offsets, c.group_metadata())
            tp.commit_transaction()
            copied += len(msgs)
    finally:
        c.close()
        tp.close(5)
    assert copied == 30
    check = kafka.KafkaConsumer(bootstrap_servers=boot, group_id=group, enable_auto_commit=False)
    assert check.committed(kafka.TopicPartition(src, 0)) == 30
    check.close()
    assert sorted(_kp_read(kafka, boot, dst, "read_committed")) == sorted(f"m{i}" for i in range(30))


def test_aiokafka_read_committed_sees_only_committed_transactions(kcluster):
    aiokafka = pytest.importorskip("aiokafka")
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ak-txn")

    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=boot, transactional_id=f"ak-{uuid.uuid4().hex[:6]}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send(topic, f"c{i}".encode())
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    for i in range(4):
                        await p.send(topic, f"a{i}".encode())
                    raise RuntimeError("abort this one")
            async with p.transaction():
                for i in range(3):
                    await p.send(topic, f"d{i}".encode())
        finally:
            await p.stop()
        out = {}
        for iso in ("read_committed", "read_uncommitted"):
            c = aiokafka.AIOKafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, isolation_level=iso)
            await c.start()
            got = []
            try:
                c.assign([aiokafka.TopicPartition(topic, 0)])
                await c.seek_to_beginning()
                for _ in range(8):
                    for msgs in (await c.getmany(timeout_ms=400)).values():
                        got += [m.value.decode() for m in msgs]
            finally:
                await c.stop()
            out[iso] = got
        return out

    out = asyncio.run(run())
    assert out["read_committed"] == [f"c{i}" for i in range(5)] + [f"d{i}" for i in range(3)]
    assert len(out["read_uncommitted"]) == 12


def test_the_lab_s_aiokafka_driver_commits_a_record_sent_before_its_topic_s_metadata_arrived(kcluster):
    """aiokafka's send() waits for the topic's metadata before it appends; a commit asked for in that wait
    ended an empty transaction, and the record joined (and was committed or aborted with) the next one:
    an aborted-by-client transaction's values read as committed (G1a in a kill-leader run)."""
    pytest.importorskip("aiokafka")
    from cluster.workloads.real_txn import client_transaction, make_txn_producer
    boot = kcluster.info().kafka_bootstrap
    p = make_txn_producer("aiokafka", boot, {}, f"ak-drv-{uuid.uuid4().hex[:6]}")
    try:
        first = _topic(boot, "ak-drv-a")        # created after the producer started: no metadata cached
        committed = client_transaction(p, first, [["send", 0, 1], ["send", 0, 2]], 20)
        second = _topic(boot, "ak-drv-b")
        aborted = client_transaction(p, second, [["send", 0, 3]], 20, abort=True)
        after = client_transaction(p, second, [["send", 0, 4]], 20)
    finally:
        p.close(5)
    assert committed.type == "ok" and [m[2] for m in committed.value] == [[0, 1], [1, 2]]
    assert aborted.type == "fail" and after.type == "ok"
    assert _read_all(boot, first, 1, "read_committed", 2) == ["1", "2"]
    assert _read_all(boot, second, 1, "read_committed", 1) == ["4"]


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
