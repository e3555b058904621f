"""Idempotent produce against a real cluster: lost ACKs, the in-flight window, sequence rules."""
import pytest

from eoslab.common.errors import E
from clients.producer import KafkaProducer, ProducerConfig
from tests import helpers as h

pytestmark = pytest.mark.integration


def _producer(bootstrap, **kw):
    cfg = dict(acks=-1, enable_idempotence=True, request_timeout_ms=1500, linger_ms=2000,
               retry_backoff_ms=20)
    cfg.update(kw)
    return KafkaProducer(bootstrap, ProducerConfig(**cfg))


def _send_batches(producer, topic, batches, per_batch):
    futs = [producer.send(topic, f"r{b}-{i}".encode(), partition=0)
            for b in range(batches) for i in range(per_batch)]
    producer.flush(timeout=60)
    return [f.result(timeout=1) for f in futs]


def test_lost_ack_retried_gives_one_copy_and_the_original_offset(cluster):
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "lost-ack")
    leader = h.leader_address(md, "lost-ack")
    h.drop_responses(leader, "lost-ack", count=1)
    p = _producer(boot)
    try:
        metas = _send_batches(p, "lost-ack", 1, 10)
        stats = p.metrics()
    finally:
        p.close()
    assert h.faults_applied(leader) == 1          # the broker appended, then lost the answer
    assert stats["retries"] >= 1                   # so the producer had to resend
    records = h.read_partition(boot, "lost-ack")
    assert [r.value for r in records] == [f"r0-{i}".encode() for i in range(10)]
    assert [m.offset for m in metas] == [r.offset for r in records] == list(range(10))


def test_send_callbacks_after_a_lost_ack_see_the_original_offsets(cluster):
    # Kafka's send(record, callback): one call per record, with the offset the retried batch really has
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "cb-lost-ack")
    leader = h.leader_address(md, "cb-lost-ack")
    h.drop_responses(leader, "cb-lost-ack", count=1)
    calls = []
    p = _producer(boot)
    try:
        futs = [p.send("cb-lost-ack", b"c%d" % i, partition=0, callback=lambda m, e: calls.append((m, e)))
                for i in range(6)]
        assert p.flush(timeout=60)
    finally:
        p.close()
    assert h.faults_applied(leader) == 1
    assert [e for _, e in calls] == [None] * 6
    assert [m.offset for m, _ in calls] == [f.result().offset for f in futs] == list(range(6))
    assert [r.value for r in h.read_partition(boot, "cb-lost-ack")] == [b"c%d" % i for i in range(6)]


def test_five_in_flight_first_ack_lost_no_duplicate(cluster):
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "window5")
    leader = h.leader_address(md, "window5")
    h.drop_responses(leader, "window5", count=1)
    # 10 records of ~20 bytes per batch: five batches, up to five in flight.
    p = _producer(boot, max_in_flight=5, batch_size=10 * 21)
    try:
        metas = _send_batches(p, "window5", 5, 10)
        stats = p.metrics()
    finally:
        p.close()
    assert h.faults_applied(leader) == 1
    assert stats["retries"] >= 1 and stats["requests"] >= 5
    records = h.read_partition(boot, "window5")
    assert len(records) == 50
    assert len({r.value for r in records}) == 50
    assert [r.value for r in records] == [f"r{b}-{i}".encode() for b in range(5) for i in range(10)]
    assert [m.offset for m in metas] == list(range(50))


def test_six_in_flight_first_ack_lost_with_epoch_bump_duplicates(make_cluster):
    """*Kafka Idempotence*, figure 5: the retried first batch is outside the 5-batch cache; a producer that
    answers OUT_OF_ORDER_SEQUENCE_NUMBER by bumping its epoch writes it a second time."""
    rt = make_cluster(brokers=1, controllers=1,
                      broker_args=["--duplicate-beyond-cache-error=OUT_OF_ORDER_SEQUENCE_NUMBER"])
    boot = rt.info().bootstrap
    md = h.new_topic(boot, "window6")
    leader = h.leader_address(md, "window6")
    h.drop_responses(leader, "window6", count=1)
    p = _producer(boot, max_in_flight=6, batch_size=10 * 21, on_out_of_order="bump-epoch")
    try:
        _send_batches(p, "window6", 6, 10)
        stats = p.metrics()
    finally:
        p.close()
    assert stats["epoch_bumps"] == 1
    values = [r.value for r in h.read_partition(boot, "window6")]
    assert len(values) == 70
    first = [f"r0-{i}".encode() for i in range(10)]
    assert values[:10] == first and values[60:] == first   # batch A twice: the seed's duplicate


def test_six_in_flight_first_ack_lost_kip98_broker_no_duplicate(make_cluster):
    """The same schedule against KIP-98's broker answer (DUPLICATE_SEQUENCE_NUMBER): no duplicate,
    and the producer reports the batch as written without an offset."""
    cluster = make_cluster(broker_args=["--duplicate-beyond-cache-error=DUPLICATE_SEQUENCE_NUMBER"])
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "window6b")
    leader = h.leader_address(md, "window6b")
    h.drop_responses(leader, "window6b", count=1)
    p = _producer(boot, max_in_flight=6, batch_size=10 * 21, on_out_of_order="bump-epoch")
    try:
        metas = _send_batches(p, "window6b", 6, 10)
        stats = p.metrics()
    finally:
        p.close()
    assert stats["duplicate_sequence_acks"] == 1 and stats["epoch_bumps"] == 0
    assert [m.offset for m in metas[:10]] == [-1] * 10
    assert len(h.read_partition(boot, "window6b")) == 60


@pytest.mark.parametrize("unknown", ["UNKNOWN_PRODUCER_ID", "accept"])
def test_sequence_rules_on_the_wire(make_cluster, unknown):
    """Kafka 1.0 to 2.4 answer UNKNOWN_PRODUCER_ID to a producer the partition has no state for that
    does not start at 0; from 2.5 (KIP-360, the default 4.0 here) the broker accepts it."""
    cluster = make_cluster(broker_args=[] if unknown == "accept" else [f"--unknown-producer={unknown}"])
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "seq")
    leader = h.leader_address(md, "seq")
    pid, epoch = h.init_pid(leader)
    assert h.produce_raw(leader, "seq", h.batch(pid, epoch, 0, 3)).base_offset == 0
    # a gap: sequence 5 after 0..2
    r = h.produce_raw(leader, "seq", h.batch(pid, epoch, 5, 1))
    assert r.error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    # in order again
    assert h.produce_raw(leader, "seq", h.batch(pid, epoch, 3, 2, start=3)).base_offset == 3
    # a retry of a cached batch gets its original offset back
    r = h.produce_raw(leader, "seq", h.batch(pid, epoch, 0, 3))
    assert (r.error, r.base_offset) == (E.NONE, 0)
    # a new epoch must start at sequence 0
    assert h.produce_raw(leader, "seq", h.batch(pid, epoch + 1, 5, 1)).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert h.produce_raw(leader, "seq", h.batch(pid, epoch + 1, 0, 1, start=5)).base_offset == 5
    # the old epoch is now fenced
    assert h.produce_raw(leader, "seq", h.batch(pid, epoch, 5, 1)).error == E.INVALID_PRODUCER_EPOCH
    # an id this partition never saw, not starting at 0
    other, _ = h.init_pid(leader)
    r = h.produce_raw(leader, "seq", h.batch(other, 0, 7, 1, start=6))
    assert r.error == (E.NONE if unknown == "accept" else E.UNKNOWN_PRODUCER_ID)
    # an id the cluster never issued
    assert h.produce_raw(leader, "seq", h.batch(10**12, 0, 0, 1)).error == E.UNKNOWN_PRODUCER_ID
    want = [b"v0", b"v1", b"v2", b"v3", b"v4", b"v5"] + ([b"v6"] if unknown == "accept" else [])
    assert [r.value for r in h.read_partition(boot, "seq")] == want


@pytest.mark.parametrize("version,answer", [("0.11", E.DUPLICATE_SEQUENCE_NUMBER),
                                            ("4.0", E.OUT_OF_ORDER_SEQUENCE_NUMBER)])
def test_duplicate_older_than_the_cache(make_cluster, version, answer):
    cluster = make_cluster(broker_args=[f"--kafka-version={version}", "--producer-state-batches=5"])
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "old-dup")
    leader = h.leader_address(md, "old-dup")
    pid, epoch = h.init_pid(leader)
    for i in range(6):
        assert h.produce_raw(leader, "old-dup", h.batch(pid, epoch, i, 1, start=i)).error == E.NONE
    r = h.produce_raw(leader, "old-dup", h.batch(pid, epoch, 0, 1))   # fell out of the last 5
    assert r.error == answer
    r = h.produce_raw(leader, "old-dup", h.batch(pid, epoch, 1, 1, start=1))  # still cached
    assert (r.error, r.base_offset) == (E.NONE, 1)
    assert len(h.read_partition(boot, "old-dup")) == 6


def test_restarted_producer_without_transactional_id_gets_a_new_pid(cluster):
    boot = cluster.info().bootstrap
    h.new_topic(boot, "restart")
    p1 = _producer(boot, linger_ms=0)
    p1.send("restart", b"x", partition=0).result(timeout=30)
    pid1 = p1.producer_id
    p1.close()
    p2 = _producer(boot, linger_ms=0)
    p2.send("restart", b"x", partition=0).result(timeout=30)   # the application resends after a restart
    pid2 = p2.producer_id
    p2.close()
    assert pid1 >= 0 and pid2 >= 0 and pid1 != pid2
    assert [r.value for r in h.read_partition(boot, "restart")] == [b"x", b"x"]   # the seeds' duplicate


def test_a_retry_after_the_producer_state_expired_is_written_again(make_cluster):
    """Kafka's known duplicate: producer.id.expiration.ms forgets an idle producer; a retry of its last
    batch that arrives later is a new write (the lab's broker, like Kafka's, no longer knows it)."""
    cluster = make_cluster(brokers=1, controllers=1, broker_args=[
        "--producer-id-expiration-ms=500", "--producer-id-expiration-check-interval-ms=100"])
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "expire")
    leader = h.leader_address(md, "expire")
    pid, epoch = h.init_pid(leader)
    first = h.produce_raw(leader, "expire", h.batch(pid, epoch, 0, 3))
    assert (first.error, first.base_offset) == (E.NONE, 0)
    again = h.produce_raw(leader, "expire", h.batch(pid, epoch, 0, 3))
    assert (again.error, again.base_offset) == (E.NONE, 0)              # still known: the cached offset
    h.wait_for(lambda: h.produce_raw(leader, "expire", h.batch(pid, epoch, 0, 3)).base_offset == 3,
               timeout=15, what="the producer state to expire")
    assert len(h.read_partition(boot, "expire")) == 6                  # the same three records twice
