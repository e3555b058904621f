"""The local runtime's faults do what they claim: partitions isolate nodes, heal removes every rule."""
import threading
import time

import pytest

from eoslab.common.errors import KafkaError
from clients.producer import KafkaProducer, ProducerConfig
from cluster import netfilter
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_isolated_leader_loses_leadership_and_nothing_acknowledged_is_lost(cluster):
    boot = cluster.bootstrap_all()
    md = h.new_topic(boot, "cut", configs={"min.insync.replicas": "2"})
    md.refresh(["cut"])
    old_id, _, old_epoch = md.leader("cut", 0)
    old = f"broker-{old_id}"
    acked, stop = [], threading.Event()

    def produce():
        p = KafkaProducer(boot, ProducerConfig(request_timeout_ms=1500, linger_ms=1, delivery_timeout_ms=60000))
        i = 0
        while not stop.is_set():
            futs = [(j, p.send("cut", b"%d" % j, partition=0)) for j in range(i, i + 20)]
            i += 20
            for j, f in futs:
                try:
                    f.result(timeout=90)
                    acked.append(j)
                except (KafkaError, TimeoutError):
                    pass
        p.close()

    t = threading.Thread(target=produce)
    t.start()
    try:
        h.wait_for(lambda: len(acked) >= 20, 60, "the first acks")
        others = [n.name for n in cluster.info().nodes if n.name != old]
        cluster.partition([[old], others])
        # ask the brokers on the majority side: the isolated one only has stale metadata
        from clients.metadata import ClusterMetadata
        md = ClusterMetadata(",".join(n.address for n in cluster.info().by_role("broker") if n.name != old))
        assert netfilter.rules(cluster.slot), "the partition installed no rule"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:          # the controller moves leadership off the cut node
            md.refresh(["cut"])
            ld = md.leader("cut", 0)
            if ld and ld[0] != old_id:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("leadership did not move off the isolated broker")
        n = len(acked)
        deadline = time.monotonic() + 20   # clients stuck on the cut-off leader time out, then move on
        while len(acked) <= n + 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(acked) > n + 20, "no progress while the old leader was cut off"
        cluster.heal()
        assert netfilter.rules(cluster.slot) == []
        n = len(acked)
        h.wait_for(lambda: len(acked) > n + 20, 60, "progress after the heal")
    finally:
        stop.set()
        t.join(120)
    assert md.leader("cut", 0)[2] > old_epoch
    # read through the majority side's metadata: the healed broker may still answer as the leader it was
    majority = ",".join(n.address for n in cluster.info().by_role("broker") if n.name != old)
    values = {int(r.value) for r in h.read_partition(majority, "cut")}
    assert set(acked) <= values


def test_a_cluster_that_does_not_become_ready_says_what_is_missing(make_cluster):
    """The readiness timeout names what the cluster still lacks (here: its only controller is
    paused, so no controller answers as the active one), not only that it timed out."""
    from cluster.local import ClusterError
    rt = make_cluster(brokers=1, controllers=1)
    rt.pause("controller-1")
    try:
        with pytest.raises(ClusterError, match=r"not ready after 1s \(no active controller answers yet\)"):
            rt.wait_ready(timeout=1)
    finally:
        rt.resume("controller-1")
