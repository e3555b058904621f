"""Replication, leader epochs and failover against real processes (the source article *What happens when a relection happens and how is idempotency still preserved?* is the specification)."""
import glob
import os
import threading
import time

import pytest

from eoslab.common.errors import E, KafkaError
from clients.producer import KafkaProducer, ProducerConfig
from eoslab.v1 import broker_pb2, controller_pb2, controller_pb2_grpc
from services.broker.log import UnifiedLog
from eoslab.common import rpc
from tests import helpers as h

pytestmark = pytest.mark.integration


def _describe(rt, topic, partition=0):
    """The partition's state from a running controller; None when none answers in time (retry)."""
    for n in rt.info().by_role("controller"):
        if n.state != "running":
            continue
        try:
            with rpc.channel(n.address) as ch:
                r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                           timeout=2)
        except Exception:  # noqa: BLE001
            continue
        if r.error == 0:
            for s in r.partition_states:
                if (s.topic, s.partition) == (topic, partition):
                    return s
    return None



def _leader_name(md, topic):
    md.refresh([topic])
    return f"broker-{md.leader(topic, 0)[0]}"


def test_seed_000_leader_killed_with_batch_in_flight(cluster):
    boot = cluster.bootstrap_all()
    md = h.new_topic(boot, "seed000", configs={"min.insync.replicas": "2"})
    p = KafkaProducer(boot, ProducerConfig(request_timeout_ms=1500, linger_ms=0, retry_backoff_ms=50))
    try:
        first = [p.send("seed000", f"m{i}".encode(), partition=0) for i in range(100)]
        p.flush()
        assert [f.result().offset for f in first] == list(range(100))
        old = _leader_name(md, "seed000")
        h.drop_responses(md.leader("seed000", 0)[1], "seed000", count=1)
        # batch 100..109: appended and replicated by the old leader, its ACK lost
        inflight = [p.send("seed000", f"m{i}".encode(), partition=0) for i in range(100, 110)]
        h.wait_for(lambda: h.faults_applied(md.leader("seed000", 0)[1]) == 1, what="the lost ACK")
        cluster.kill(old)
        metas = [f.result(timeout=60) for f in inflight]
        after = [p.send("seed000", f"m{i}".encode(), partition=0) for i in range(110, 120)]
        p.flush()
        stats = p.metrics()
    finally:
        p.close()
    assert stats["retries"] >= 1
    assert [m.offset for m in metas] == list(range(100, 110))        # recognised as a duplicate
    assert [f.result().offset for f in after] == list(range(110, 120))
    assert _leader_name(md, "seed000") != old
    values = [r.value for r in h.read_partition(boot, "seed000")]
    assert values == [f"m{i}".encode() for i in range(120)]           # no gap, no duplicate, in order
    # the election bumped the leader epoch: requests carrying the old one are fenced
    _, addr, epoch = md.leader("seed000", 0)
    assert epoch >= 1

    def fetch_error(e):
        return h.broker_stub(addr).Fetch(broker_pb2.FetchRequest(replica_id=-1, partitions=[
            broker_pb2.FetchPartition(topic="seed000", partition=0, fetch_offset=0, current_leader_epoch=e)]),
            timeout=5).partitions[0].error
    assert fetch_error(epoch - 1) == E.FENCED_LEADER_EPOCH
    assert fetch_error(epoch + 1) == E.UNKNOWN_LEADER_EPOCH
    assert fetch_error(epoch) == E.NONE


def test_acks_all_loses_nothing_across_faults(cluster):
    boot = cluster.bootstrap_all()
    md = h.new_topic(boot, "durable3", configs={"min.insync.replicas": "2"})
    acked, stop = [], threading.Event()

    def produce():
        p = KafkaProducer(boot, ProducerConfig(request_timeout_ms=2000, linger_ms=1, delivery_timeout_ms=60000))
        i = 0
        while not stop.is_set():
            futs = [(j, p.send("durable3", b"%d" % j, partition=0)) for j in range(i, i + 50)]
            i += 50
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
        h.wait_for(lambda: len(acked) >= 50, 60, "the first acks")
        faults = [("kill leader", lambda: cluster.kill(_leader_name(md, "durable3"))),
                  ("kill follower", lambda: cluster.kill(next(
                      f"broker-{b}" for b in range(1, 4) if f"broker-{b}" != _leader_name(md, "durable3")
                      and cluster.node_state(f"broker-{b}") == "running"))),
                  ("pause leader", lambda: cluster.pause(_leader_name(md, "durable3"))),
                  ("kill controller", lambda: cluster.kill(next(
                      n.name for n in cluster.info().by_role("controller") if n.state == "running"))),
                  ("restart a broker", lambda: cluster.restart("broker-1"))]
        for what, fault in faults:
            n_before = len(acked)
            fault()
            time.sleep(3)
            for n in cluster.info().nodes:          # heal: everything back
                if n.state == "paused":
                    cluster.resume(n.name)
                elif n.state == "dead":
                    cluster.start(n.name)
            cluster.wait_ready()
            h.wait_for(lambda: len(acked) > n_before + 100, 60, f"progress after {what}")
    finally:
        stop.set()
        t.join(120)
    assert len(acked) > 500
    values = [int(r.value) for r in h.read_partition(boot, "durable3")]
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(values) == len(set(values)), "idempotent producer wrote a duplicate"


def test_acks_1_unclean_election_loses_an_acknowledged_record(make_cluster):
    """The seeds' warning: with acks=1 the leader acknowledges before any follower has the record;
    if it dies and an out-of-sync replica is elected (unclean election), the record is gone."""
    rt = make_cluster(brokers=3, controllers=1)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "unclean", configs={"unclean.leader.election.enable": "true"})
    leader = _leader_name(md, "unclean")
    followers = [f"broker-{b}" for b in range(1, 4) if f"broker-{b}" != leader]
    safe = KafkaProducer(boot, ProducerConfig(linger_ms=0))      # acks=all: every replica has it
    safe.send("unclean", b"before", partition=0).result(30)
    safe.close()
    p = KafkaProducer(boot, ProducerConfig(acks=1, enable_idempotence=False, linger_ms=0))
    for f in followers:
        rt.pause(f)                    # followers stop fetching; their sessions expire; the ISR shrinks
    h.wait_for(lambda: (s := _describe(rt, "unclean")) and list(s.isr) == [int(leader.split("-")[1])],
               what="ISR = leader only")
    meta = p.send("unclean", b"acknowledged", partition=0).result(30)   # acks=1: the leader alone has it
    p.close()
    rt.kill(leader)
    for f in followers:
        rt.resume(f)
    h.wait_for(lambda: (s := _describe(rt, "unclean")) and f"broker-{s.leader}" in followers,
               what="an unclean leader")
    values = [r.value for r in h.read_partition(boot, "unclean")]
    assert meta.offset == 1
    assert b"before" in values and b"acknowledged" not in values    # acknowledged, then lost


def test_isr_shrinks_and_expands_through_the_controller(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, broker_args=["--replica-lag-time-max-ms=1000"],
                      session_timeout_ms=10000)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "isr")
    leader = _leader_name(md, "isr")
    follower = next(f"broker-{b}" for b in range(1, 4) if f"broker-{b}" != leader)
    fid = int(follower.split("-")[1])
    p = KafkaProducer(boot, ProducerConfig(linger_ms=0, acks=1, enable_idempotence=False))
    rt.pause(follower)
    p.send("isr", b"x", partition=0).result(30)
    before = h.wait_for(lambda: (s := _describe(rt, "isr")) and fid not in s.isr and s, what="ISR shrink")
    rt.resume(follower)
    p.send("isr", b"y", partition=0).result(30)
    after = h.wait_for(lambda: (s := _describe(rt, "isr")) and fid in s.isr and s, what="ISR expand")
    p.close()
    assert after.leader_epoch == before.leader_epoch      # KIP-497: an ISR change keeps the leader epoch
    assert after.zk_version > before.zk_version           # but is a new versioned write
    # a leader's request carrying a stale partition version is refused
    ctrl = rt.info().by_role("controller")[0].address
    with rpc.channel(ctrl) as ch:
        r = controller_pb2_grpc.ControllerStub(ch).AlterPartition(controller_pb2.AlterPartitionRequest(
            broker_id=after.leader, broker_epoch=h.broker_epoch(rt, after.leader), topic="isr", partition=0,
            leader_epoch=after.leader_epoch, new_isr=[after.leader], partition_epoch=before.zk_version), timeout=5)
    assert r.error == E.INVALID_UPDATE_VERSION and list(r.state.isr) == list(after.isr)


def test_min_insync_and_fenced_epochs_on_the_wire(make_cluster):
    rt = make_cluster(brokers=3, controllers=1)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "minisr", configs={"min.insync.replicas": "3"})
    address = h.leader_address(md, "minisr")           # once that broker acts as leader, not just in metadata
    leader = (md.leader("minisr", 0)[0], address)
    pid, epoch = h.init_pid(leader[1])
    assert h.produce_raw(leader[1], "minisr", h.batch(pid, epoch, 0, 1)).error == E.NONE
    rt.kill(next(f"broker-{b}" for b in range(1, 4) if b != leader[0]))
    h.wait_for(lambda: (s := _describe(rt, "minisr")) and len(s.isr) == 2, what="ISR of 2")
    # the ISR reaches the leader a moment after the controller's: until then the leader appends, and answers
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND once the ISR shrinks (up to 3.x: the high watermark moves on with the
    # two left) or REQUEST_TIMED_OUT (4.0: no high watermark under min.insync.replicas, as Kafka's
    # Partition.maybeIncrementLeaderHW). Either way the record is in its log: the next batch takes the next
    # sequence.
    answers, seq, in_log = [], [1], {E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT}

    def refused():
        r = h.produce_raw(leader[1], "minisr", h.batch(pid, epoch, seq[0], 1, start=seq[0]), timeout_ms=3000)
        answers.append(r.error)
        if r.error in in_log:
            seq[0] += 1
        return r.error == E.NOT_ENOUGH_REPLICAS
    h.wait_for(refused, timeout=60, what="NOT_ENOUGH_REPLICAS from the leader")
    assert set(answers[:-1]) <= in_log
    # a produce to a follower is refused
    stub = h.broker_stub(leader[1])
    live_follower = next(n.address for n in rt.info().by_role("broker")
                         if n.state == "running" and n.node_id != leader[0])
    assert h.produce_raw(live_follower, "minisr", h.batch(pid, epoch, 1, 1)).error == E.NOT_LEADER_OR_FOLLOWER
    # brokers refuse a stale controller
    r = stub.LeaderAndIsr(broker_pb2.LeaderAndIsrRequest(controller_id=9, controller_epoch=0), timeout=5)
    assert r.error == E.STALE_CONTROLLER_EPOCH


def test_divergent_tail_truncated_by_leader_epoch(make_cluster):
    # long session and lag limits: the paused follower stays in the ISR, so it may be elected cleanly
    rt = make_cluster(brokers=2, controllers=1, session_timeout_ms=10000,
                      broker_args=["--replica-lag-time-max-ms=20000"])
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "diverge")
    old = _leader_name(md, "diverge")
    other = "broker-2" if old == "broker-1" else "broker-1"
    p = KafkaProducer(boot, ProducerConfig(acks=1, enable_idempotence=False, linger_ms=0))
    for i in range(3):
        p.send("diverge", b"a%d" % i, partition=0).result(30)
    h.wait_for(lambda: rt.node_state(other) == "running", what="follower")
    leader_addr = h.leader_address(md, "diverge")
    h.wait_for(lambda: h.high_watermark(leader_addr, "diverge") == 3, what="the follower to have a0..a2")
    rt.pause(other)
    # a fetch the follower sent before the pause may still carry what comes next: spend it on one
    # record, so the five after it can only reach the old leader
    p.send("diverge", b"sacrificial", partition=0).result(30)
    time.sleep(1.0)
    for i in range(5):                               # only the old leader gets these (acks=1)
        p.send("diverge", b"lost%d" % i, partition=0).result(30)
    p.close()
    rt.stop(old)                                     # clean stop: its session ends at once, its log stays
    rt.resume(other)
    h.wait_for(lambda: _leader_name(md, "diverge") == other, 60, "the follower to lead")
    p = KafkaProducer(boot.split(",")[int(other[-1]) - 1], ProducerConfig(acks=1, enable_idempotence=False,
                                                                         linger_ms=0))
    for i in range(2):
        p.send("diverge", b"b%d" % i, partition=0).result(30)
    p.close()
    rt.start(old)                                     # comes back as a follower with a divergent tail
    h.wait_for(lambda: (s := _describe(rt, "diverge")) and len(s.isr) == 2, 60, "the old leader back in the ISR")
    rt.stop("broker-1")
    rt.stop("broker-2")
    logs = {}
    for b in ("broker-1", "broker-2"):
        d = glob.glob(os.path.join(rt.dir, "data", b, "diverge-0"))[0]
        lg = UnifiedLog(d)
        logs[b] = [(x.base_offset, x.leader_epoch, x.records) for x in lg.batches()]
        lg.close()
    assert logs["broker-1"] == logs["broker-2"]
    records = [r for _, _, r in logs["broker-1"]]
    # the old leader had the five "lost" records; the new leader never did, so the old leader
    # truncated that divergent tail by leader epoch and took the new leader's records instead
    assert not any(b"lost" in r for r in records)
    kept = sum(b"sacrificial" in r for r in records)
    assert len(records) == 3 + kept + 2 and b"b1" in records[-1]


def test_acks_0_and_acks_1_are_answered_without_waiting_for_followers(make_cluster):
    rt = make_cluster(brokers=3, controllers=1, session_timeout_ms=10000)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "acks")
    leader = _leader_name(md, "acks")
    for b in range(1, 4):
        if f"broker-{b}" != leader:
            rt.pause(f"broker-{b}")         # no follower fetches: acks=all could not complete
    try:
        p0 = KafkaProducer(boot, ProducerConfig(acks=0, enable_idempotence=False, linger_ms=0))
        m0 = p0.send("acks", b"zero", partition=0).result(10)
        p0.flush()
        p0.close()
        p1 = KafkaProducer(boot, ProducerConfig(acks=1, enable_idempotence=False, linger_ms=0))
        m1 = p1.send("acks", b"one", partition=0).result(10)
        p1.close()
    finally:
        for b in range(1, 4):
            rt.resume(f"broker-{b}")
    assert m0.offset == -1 and m1.offset >= 0            # acks=0: no answer, so no offset
    # consumers see them once the resumed followers have them (the high watermark moves)
    values = h.wait_for(lambda: [r.value for r in h.read_partition(boot, "acks")], what="the high watermark")
    assert values == [b"zero", b"one"]
