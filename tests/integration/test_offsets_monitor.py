"""The offsets monitor samples each partition's LSO and high watermark from the leaders, and settles
only once the LSO has caught up: an open transaction holds it back until it ends."""
import json

import pytest

from clients.producer import KafkaProducer, ProducerConfig
from cluster.history import History
from cluster.offsets_monitor import OffsetsMonitor
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_an_open_transaction_holds_the_lso_until_it_commits(make_cluster, tmp_path):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=1)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "mon", partitions=2)
    hist = History(str(tmp_path / "history.jsonl"))
    mon = OffsetsMonitor(md, hist, "mon", 2, interval=0.05)
    p = KafkaProducer(boot, ProducerConfig(transactional_id="mon-1", linger_ms=0, request_timeout_ms=3000,
                                           transaction_timeout_ms=60000))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("mon", b"a", partition=1).result(10)
        p.send("mon", b"b", partition=1).result(10)
        h.wait_for(lambda: [1, 0, 2] in mon.sample(), what="partition 1 with its LSO held at 0 by the open "
                                                             "transaction, its high watermark at 2")
        assert mon.settle(0.3) is False                  # still open: the LSO has not caught up
        p.commit_transaction()
        assert mon.settle(30) is True
        last = mon.sample()
        assert sorted(last) == [[0, 0, 0], [1, 3, 3]]    # the two records and the commit marker
    finally:
        p.close()
        hist.close()
    ops = [json.loads(line) for line in open(tmp_path / "history.jsonl")]
    assert ops and all(o["process"] == "monitor" and o["type"] == "info" and o["f"] == "offsets" for o in ops)
    assert mon.samples == len(ops)


def test_a_leader_that_does_not_answer_is_left_out_of_the_sample(make_cluster, tmp_path):
    rt = make_cluster(brokers=2, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "mon2", partitions=4)
    mon = OffsetsMonitor(md, History(None), "mon2", 4, rpc_timeout=0.5)
    h.wait_for(lambda: len(mon.sample()) == 4, what="every partition sampled")
    md.refresh(["mon2"])
    assert 0 < len({p for p in range(4) if md.leader("mon2", p)[0] == 2}) < 4     # leaders on both brokers
    rt.pause("broker-2")
    try:
        got = mon.sample()                               # no wait: the sample does not hang on broker-2
        # the leaders as the monitor saw them for this sample (it may refresh its metadata first, from a
        # broker that has not yet heard of a leadership move: that partition is then asked of broker-1)
        led_by_2 = {p for p in range(4) if md.leader("mon2", p)[0] == 2}
        assert led_by_2 and {p for p, _, _ in got} == set(range(4)) - led_by_2
    finally:
        rt.resume("broker-2")
