"""The consumer's fetch round on a real cluster: every leader is asked at once, so records on one leader
come back without waiting out the long polls of the leaders that have none."""
import time

import pytest

from clients.consumer import KafkaConsumer
from clients.producer import KafkaProducer, ProducerConfig
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_a_poll_answers_with_one_leaders_records_without_waiting_for_the_others(cluster):
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "spread", partitions=3)
    leaders = {p: h.leader_address(md, "spread", p) for p in range(3)}
    assert len(set(leaders.values())) == 3            # one partition per broker
    c = KafkaConsumer(boot, max_wait_ms=4000)
    p = KafkaProducer(boot, ProducerConfig(linger_ms=0))
    try:
        c.assign([("spread", i) for i in range(3)])
        c.seek_to_beginning()
        for part in range(3):                        # whichever leader the round asks first
            p.send("spread", b"v%d" % part, partition=part).result(30)
            t0 = time.monotonic()
            got = []
            while not got and time.monotonic() - t0 < 20:
                got = c.poll(timeout_ms=4000)
            assert [(r.partition, r.value) for r in got] == [(part, b"v%d" % part)]
            assert time.monotonic() - t0 < 3.0        # asked one after another: 4 s per empty leader
        t0 = time.monotonic()
        assert c.poll(timeout_ms=1000) == []          # nothing anywhere: every long poll runs out
        assert time.monotonic() - t0 < 3.0            # together, not one after another
    finally:
        p.close()
        c.close()


def test_an_answer_for_an_offset_the_consumer_left_is_dropped(cluster):
    # a fetch still in flight when the consumer seeks must not move the partition past the new position
    boot = cluster.info().bootstrap
    h.new_topic(boot, "seek-away", partitions=1)
    p = KafkaProducer(boot, ProducerConfig(linger_ms=0))
    c = KafkaConsumer(boot, max_wait_ms=4000)
    try:
        for i in range(5):
            p.send("seek-away", b"r%d" % i, partition=0).result(30)
        tp = ("seek-away", 0)
        c.assign([tp])
        c.seek(tp, 5)
        assert c.poll(timeout_ms=100) == []          # a fetch at offset 5 stays in flight
        c.seek(tp, 0)
        p.send("seek-away", b"r5", partition=0).result(30)   # ... and now answers with offset 5
        got = []
        t0 = time.monotonic()
        while len(got) < 6 and time.monotonic() - t0 < 20:
            got += c.poll(timeout_ms=1000)
        assert [r.offset for r in got] == list(range(6))
        assert [r.value for r in got] == [b"r%d" % i for i in range(6)]
    finally:
        p.close()
        c.close()


def test_short_polls_lose_and_repeat_nothing_while_fetches_outlive_them(cluster):
    boot = cluster.info().bootstrap
    h.new_topic(boot, "short-polls", partitions=3)
    p = KafkaProducer(boot, ProducerConfig(linger_ms=0))
    c = KafkaConsumer(boot, max_wait_ms=500)
    try:
        tps = [("short-polls", i) for i in range(3)]
        c.assign(tps)
        c.seek_to_beginning()
        got = []
        for i in range(150):
            p.send("short-polls", b"%d" % i, partition=i % 3)
            if i % 10 == 0:
                got += c.poll(timeout_ms=5)           # much shorter than the fetches' long polls
        assert p.flush(30)
        t0 = time.monotonic()
        while len(got) < 150 and time.monotonic() - t0 < 20:
            got += c.poll(timeout_ms=5)
        assert sorted(int(r.value) for r in got) == list(range(150))
        for tp in tps:
            offs = [r.offset for r in got if (r.topic, r.partition) == tp]
            assert offs == list(range(len(offs)))     # per partition: in order, once each
    finally:
        p.close()
        c.close()


def test_a_dead_leader_is_retried_after_a_backoff_not_in_a_tight_loop(cluster):
    """The leader is killed: each fetch to it fails at once (connection refused) until the controller
    moves leadership. The consumer backs off retry_backoff_ms (100 ms) between tries, as Kafka's
    retry.backoff.ms, instead of re-sending and refreshing metadata as fast as the errors come."""
    boot = cluster.info().bootstrap
    md = h.new_topic(boot, "backoff", partitions=1)
    h.leader_address(md, "backoff")
    leader_id = md.leader("backoff", 0)[0]
    c = KafkaConsumer(boot, max_wait_ms=200, retry_backoff_ms=100)
    refreshes = []
    real_refresh = c.metadata.refresh

    def counted(*args, **kw):
        refreshes.append(time.monotonic())
        return real_refresh(*args, **kw)

    c.metadata.refresh = counted
    try:
        c.assign([("backoff", 0)])
        c.seek_to_beginning()
        assert c.poll(timeout_ms=300) == []
        cluster.kill(f"broker-{leader_id}")
        refreshes.clear()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:
            c.poll(timeout_ms=250)
        assert 2 <= len(refreshes) <= 25, len(refreshes)     # about one per 100 ms, not hundreds
    finally:
        c.close()
