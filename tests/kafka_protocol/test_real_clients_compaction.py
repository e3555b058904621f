"""Log compaction with real clients, after librdkafka's 0077-compaction at a small scale: librdkafka produces
keyed records (tombstones among them) with each codec to a topic with cleanup.policy=compact, fills a few
segments after them, and once the brokers' cleaners ran, a librdkafka consumer and kafka-python read exactly
the latest record of each key at the offset it was written at, the tombstone included."""
import os
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from tests.kafka_protocol.real_clients_support import _topic, start_kcluster, stored_batches  # noqa: E402

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "86400000", "max.compaction.lag.ms": "100", "file.delete.delay.ms": "1000"}


@pytest.fixture(scope="module")
def compact_cluster(eoslab_home):
    yield from start_kcluster(eoslab_home, "cmp", ["--cleaner-backoff-ms=200"])


def _produce(boot, topic, records, codec, **extra) -> list[int]:
    """Produce (key, value) pairs in order; the offsets they were written at."""
    p = Producer({"bootstrap.servers": boot, "compression.type": codec, "linger.ms": 10, **extra})
    offsets, errors = {}, []

    def done(i):
        return lambda err, msg: errors.append(err) if err else offsets.__setitem__(i, msg.offset())
    for i, (k, v) in enumerate(records):
        p.produce(topic, key=k, value=v, on_delivery=done(i))
        p.poll(0)
    assert p.flush(30) == 0 and errors == []
    return [offsets[i] for i in range(len(records))]


def _consume_all(boot, topic, end) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": boot, "group.id": f"cmp-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    def more():
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.key(), m.value()))
        return got and got[-1][0] >= end - 1
    h.wait_for(more, timeout=30, what=f"{topic} read to offset {end}")
    c.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_librdkafka_reads_the_latest_record_of_each_key_at_its_own_offset_after_compaction(compact_cluster, codec):
    boot = compact_cluster.info().kafka_bootstrap
    topic = _topic(boot, f"compact-{codec}", config=COMPACT)
    fill_key = uuid.uuid4().hex.encode()
    fill = [(fill_key, b"\0" * 2000) for _ in range(9)] + [(fill_key, None)]
    _produce(boot, topic, fill, "none", **{"batch.num.messages": 1})
    keyed = []
    for i in range(60):
        key = [b"k1", b"k2", b"k3", b"u%d" % i][i % 4]
        tomb = key == b"k1" and i % 7 == 0
        keyed.append((key, None if tomb else b"%s-%d" % (key, i)))
    keyed += [(b"k1", None), (b"k2", b"k2-last"), (b"k3", b"k3-last"), (b"u-last", b"u-last")]
    offs = _produce(boot, topic, keyed, codec, **{"enable.idempotence": True})
    fill2 = uuid.uuid4().hex.encode()
    end = _produce(boot, topic, [(fill2, b"\0" * 2000) for _ in range(20)], "none",
                   **{"batch.num.messages": 1})[-1] + 1
    latest = {}
    for (k, v), o in zip(keyed, offs):
        latest[k] = (o, v)
    expect = sorted((o, k, v) for k, (o, v) in latest.items())

    def compacted():
        from eoslab.common import record_batch as rb
        seen = [r for b in stored_batches(compact_cluster, topic) for r in rb.records_with_offsets(b)
                if r[1] is not None and not r[1].startswith((fill_key, fill2))]
        return [(o, k, v) for o, k, v, *_ in seen] == expect
    h.wait_for(compacted, timeout=60, what=f"{topic} compacted on its leader")
    got = _consume_all(boot, topic, end)
    assert [r for r in got if not r[1].startswith((fill_key, fill2))] == expect
    assert (offs[-4], b"k1", None) in got                     # the last tombstone stays for delete.retention.ms
    assert [o for o, _, _ in got] == sorted(set(o for o, _, _ in got))

    from kafka import KafkaConsumer, TopicPartition as KTP
    kc = KafkaConsumer(bootstrap_servers=boot, auto_offset_reset="earliest", enable_auto_commit=False,
                       consumer_timeout_ms=5_000)
    kc.assign([KTP(topic, 0)])
    kgot = [(m.offset, m.key, m.value) for m in kc]
    kc.close()
    assert [r for r in kgot if not r[1].startswith((fill_key, fill2))] == expect

    from clients.consumer import KafkaConsumer as LabConsumer     # the lab's own client, over gRPC
    lc = LabConsumer(compact_cluster.bootstrap_all(), max_wait_ms=200)
    try:
        lgot = [(r.offset, r.key, r.value) for r in lc.read_all([(topic, 0)])]
    finally:
        lc.close()
    # the fill records share a key each and the cleaner may compact them further between two reads: compare the rest
    assert [r for r in lgot if not r[1].startswith((fill_key, fill2))] == expect
    assert [o for o, _, _ in lgot] == sorted(set(o for o, _, _ in lgot))


def test_a_transactional_compacted_topic_keeps_committed_records_and_loses_aborted_ones(compact_cluster):
    """Kafka Streams' changelogs: transactions on a compacted topic. After cleaning, read_committed reads the
    latest committed record of each key, and the aborted writes are gone for read_uncommitted too."""
    boot = compact_cluster.info().kafka_bootstrap
    topic = _topic(boot, "compact-txn", config=COMPACT)
    p = Producer({"bootstrap.servers": boot, "transactional.id": f"cmp-{uuid.uuid4().hex[:6]}", "linger.ms": 5})
    p.init_transactions(30)
    for round_, commit in enumerate([True, False, True, False]):
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, key=b"k%d" % (i % 3), value=b"%s-%d-%d" % (b"c" if commit else b"a", round_, i))
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    p.begin_transaction()
    for _ in range(20):
        p.produce(topic, key=b"pad", value=b"\0" * 2000)
        p.flush(30)                          # one batch each: the rounds above leave the active segment
    p.commit_transaction(30)
    expect = {b"k%d" % (i % 3): b"c-2-%d" % i for i in range(27, 30)}

    def data(isolation):
        c = Consumer({"bootstrap.servers": boot, "group.id": f"cmp-{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False, "isolation.level": isolation})
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        def to_pad():
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.key(), m.value()))
            return sum(1 for k, _ in got if k == b"pad") >= 1 and got[-1][0] == b"pad"
        h.wait_for(to_pad, timeout=30, what=f"{topic} read ({isolation})")
        c.close()
        return [(k, v) for k, v in got if k != b"pad"]

    def aborted_gone():
        from eoslab.common import record_batch as rb
        values = [r[2] for b in stored_batches(compact_cluster, topic) for r in rb.records_with_offsets(b)
                  if not b.attributes & rb.CONTROL_FLAG and r[1] != b"pad"]
        return sorted(values) == sorted(expect.values())
    h.wait_for(aborted_gone, timeout=60, what=f"{topic} compacted on its leader")
    assert dict(data("read_committed")) == expect and len(data("read_committed")) == 3
    assert sorted(data("read_uncommitted")) == sorted(expect.items())


def test_an_open_transaction_holds_the_cleaner_at_its_first_offset_until_it_ends(compact_cluster):
    """Kafka's last-stable-offset rule for the cleaner, the way a hanging transaction stalls compaction: nothing
    at or after an open transaction's first offset is cleaned; once it commits, the cleaner goes past it."""
    from eoslab.common import record_batch as rb
    boot = compact_cluster.info().kafka_bootstrap
    topic = _topic(boot, "compact-open", config=COMPACT)
    pads = [(b"pad", b"\0" * 2000)] * 10
    _produce(boot, topic, [(b"k", b"a%d" % i) for i in range(10)], "none")
    _produce(boot, topic, pads, "none", **{"batch.num.messages": 1})
    txn = Producer({"bootstrap.servers": boot, "transactional.id": f"open-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, key=b"k", value=b"in-txn")
    assert txn.flush(30) == 0
    _produce(boot, topic, [(b"k", b"b%d" % i) for i in range(10)], "none")
    _produce(boot, topic, pads, "none", **{"batch.num.messages": 1})

    def values():
        return [r[2] for b in stored_batches(compact_cluster, topic) for r in rb.records_with_offsets(b)
                if not b.attributes & rb.CONTROL_FLAG and r[1] == b"k"]
    held = [b"a9", b"in-txn"] + [b"b%d" % i for i in range(10)]
    h.wait_for(lambda: values() == held, timeout=60, what="the records before the open transaction cleaned")
    from services.broker.log_cleaner_manager import read_cleaner_checkpoint
    txn_offset = next(r[0] for b in stored_batches(compact_cluster, topic) for r in rb.records_with_offsets(b)
                      if r[2] == b"in-txn")
    checkpoints = [read_cleaner_checkpoint(os.path.join(compact_cluster.dir, "data", f"broker-{i}", f"{topic}-0"))
                   for i in (1, 2, 3)]
    assert 0 < max(checkpoints) <= txn_offset, checkpoints     # every replica's cleaner stopped before it
    assert values() == held
    txn.commit_transaction(30)
    h.wait_for(lambda: values() == [b"b9"], timeout=60, what="the cleaner past the committed transaction")


def _replica_latest(rt, node: str, topic: str) -> dict:
    """key -> (offset, value) of the latest record of each key in one replica's segment files, read-only."""
    import glob
    import os

    from services.broker.log_segment import _parse
    latest = {}
    for path in sorted(glob.glob(os.path.join(rt.dir, "data", node, f"{topic}-0", "*.log"))):
        with open(path, "rb") as f:
            buf = f.read()
        pos = 0
        while (parsed := _parse(buf, pos)) is not None:
            b, pos = parsed
            if not b.is_control:
                for o, k, v, *_ in rb_records(b):
                    latest[k] = (o, v)
    return latest


def rb_records(b):
    from eoslab.common import record_batch as rb
    return rb.records_with_offsets(b)


def test_replicas_agree_after_compaction_across_a_leader_kill_and_restart(compact_cluster):
    """Followers copy a cleaned leader's log, gaps and empty batches included, and clean their own: with the
    leader killed between two rounds of writes and started again, every replica ends with the same latest
    record per key, the one acknowledged last, and a consumer reads exactly those."""
    from clients.metadata import ClusterMetadata
    boot = compact_cluster.info().kafka_bootstrap
    topic = _topic(boot, "compact-kill", config=COMPACT)
    pads = [(b"pad", b"\0" * 2000)] * 20
    md = ClusterMetadata(compact_cluster.bootstrap_all())
    try:
        h.wait_for(lambda: md.refresh([topic]) and md.leader(topic, 0), what="a leader")
        leader_node = f"broker-{md.leader(topic, 0)[0]}"
    finally:
        md.close()
    behind = next(f"broker-{i}" for i in (1, 2, 3) if f"broker-{i}" != leader_node)
    compact_cluster.kill(behind)              # it will copy the leader's cleaned log, gaps and all
    first = _produce(boot, topic, [(b"k%d" % (i % 5), b"a%d" % i) for i in range(200)], "gzip", acks="all",
                     **{"enable.idempotence": True})
    _produce(boot, topic, pads, "none", **{"batch.num.messages": 1})        # the keyed records leave the active segment
    checkpoint = os.path.join(compact_cluster.dir, "data", leader_node, f"{topic}-0", "cleaner-offset-checkpoint")
    h.wait_for(lambda: os.path.exists(checkpoint), timeout=60, what="the leader's first cleaning")
    compact_cluster.start(behind)
    h.wait_for(lambda: _replica_latest(compact_cluster, behind, topic) ==
               _replica_latest(compact_cluster, leader_node, topic), timeout=60, what=f"{behind} caught up")
    compact_cluster.kill(leader_node)
    second = _produce(boot, topic, [(b"k%d" % (i % 5), b"b%d" % i) for i in range(100)], "zstd", acks="all",
                      **{"enable.idempotence": True})
    second += _produce(boot, topic, pads, "none", **{"batch.num.messages": 1})
    compact_cluster.start(leader_node)
    expect = {b"k%d" % (i % 5): (second[i], b"b%d" % i) for i in range(100)}
    expect[b"pad"] = (second[-1], b"\0" * 2000)
    nodes = [f"broker-{i}" for i in (1, 2, 3)]
    h.wait_for(lambda: all(_replica_latest(compact_cluster, n, topic) == expect for n in nodes), timeout=90,
               what="every replica holding the last acknowledged record of each key")
    assert first[-1] < second[0]
    got = _consume_all(boot, topic, second[-1] + 1)
    latest = {}
    for o, k, v in got:
        latest[k] = (o, v)
    assert latest == expect
    assert [o for o, _, _ in got] == sorted(set(o for o, _, _ in got))
