"""Real Kafka clients (librdkafka through confluent-kafka, kafka-python, aiokafka) against a real local
cluster over the brokers' and coordinators' Kafka listeners."""
import asyncio
import time
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402


from tests.kafka_protocol.real_clients_support import _read_all, _topic, stored_batches  # noqa: E402


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
    refuse all but gzip with UNSUPPORTED_COMPRESSION_TYPE), stores the batches compressed as they were
    sent and serves them so (it used to store and serve them decompressed); the lab's own consumer reads
    them too."""
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
    from clients.consumer import KafkaConsumer as LabConsumer
    from eoslab.common import record_batch as rb
    batches = stored_batches(kcluster, topic)
    ids = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert batches and all(rb.kafka_layout(b) and b.attributes & rb.COMPRESSION_MASK == ids[codec] for b in batches)
    assert sum(len(b.records) for b in batches) < 200 * 200 // 4      # compressed: far under the values' bytes
    lab = LabConsumer(kcluster.bootstrap_all())
    lab.assign([(topic, 0)])
    seen, deadline = [], time.monotonic() + 20
    while len(seen) < 200 and time.monotonic() < deadline:
        seen += [r.value.decode() for r in lab.poll(500)]
    lab.close()
    assert seen == got


def test_max_message_bytes_applies_to_the_batch_as_sent_not_to_its_decompressed_records(kcluster):
    """A gzip batch of 4 KB under a topic's max.message.bytes of 4096 is taken, though its records take
    ~40 KB once decompressed (the broker used to check the uncompressed re-encoding and answer
    MESSAGE_TOO_LARGE, as Kafka never does); an uncompressed batch of that size is still refused."""
    boot = kcluster.info().kafka_bootstrap
    topic = _topic(boot, "ck-max-bytes", config={"max.message.bytes": "4096"})
    sent, errors = [f"r{i:03d}-".encode() + b"a" * 1000 for i in range(40)], []
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "compression.type": "gzip",
                  "linger.ms": 50, "batch.size": 65536, "message.max.bytes": 100000})
    for v in sent:
        p.produce(topic, value=v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []
    assert _read_all(boot, topic, 1, "read_uncommitted", 40) == [v.decode() for v in sent]
    plain = Producer({"bootstrap.servers": boot, "compression.type": "none", "linger.ms": 50,
                      "batch.size": 65536, "message.max.bytes": 100000, "retries": 0})
    for v in sent:
        plain.produce(topic, value=v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    plain.flush(30)
    assert errors and all(e.code() == KafkaError.MSG_SIZE_TOO_LARGE for e in errors)


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
    # EndTxn is answered once the coordinator has written PrepareCommit; the COMMIT marker that makes the
    # transaction's offsets visible reaches __consumer_offsets after that, as in Kafka
    h.wait_for(lambda: check.committed(kafka.TopicPartition(src, 0)) == 30, timeout=30,
               what="the transaction's offsets committed")
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
