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
