"""Transactions against real processes (the source articles *Build Kafka*
scene 08, *Idempotent producers and sequence numbers* and *What happens when a relection happens*, section 7): atomic commit,
read_committed, last stable offset, zombie fencing, transaction timeout, coordinator failover."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from clients.consumer import KafkaConsumer
from eoslab.common.errors import E, KafkaError
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from eoslab.v1 import broker_pb2
from tests import helpers as h

pytestmark = pytest.mark.integration
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def txn_producer(boot, tid, **kw):
    kw.setdefault("linger_ms", 0)
    return KafkaProducer(boot, ProducerConfig(transactional_id=tid, request_timeout_ms=3000, **kw))


def committed_values(boot, topic, partitions=1):
    """Every committed record, once no transaction on the partitions is still open or unmarked
    (commit_transaction returns once the commit is decided; markers are written after it)."""
    for p in range(partitions):
        h.wait_for(lambda: end_offset(boot, topic, "read_committed", p) == end_offset(boot, topic,
                                                                                    "read_uncommitted", p),
                 what=f"{topic}-{p} to become stable")
    c = KafkaConsumer(boot, isolation_level="read_committed")
    try:
        return [r.value for r in c.read_all([(topic, p) for p in range(partitions)], timeout=60)]
    finally:
        c.close()


def end_offset(boot, topic, isolation, partition=0):
    c = KafkaConsumer(boot, isolation_level=isolation)
    try:
        return c.end_offsets([(topic, partition)])[(topic, partition)]
    finally:
        c.close()


def coordinator_node(boot, tid) -> str:
    md = ClusterMetadata(boot)
    try:
        for _ in range(100):
            r = md.stub(md.any_broker()).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                key_type=broker_pb2.TRANSACTION, key=tid), timeout=5)
            if r.error == E.NONE:
                return f"txn-coordinator-{r.node_id}"
            time.sleep(0.1)
    finally:
        md.close()
    raise AssertionError(f"no coordinator for {tid}")



def test_commit_visible_abort_invisible_and_lso(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "atomic", 2)
    p = txn_producer(boot, "atomic-1")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send("atomic", f"a{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send("atomic", f"b{i}".encode(), partition=i % 2)
        p.flush()
        # open transaction: read_committed stops at its first offset (the LSO), read_uncommitted does not
        h.wait_for(lambda: end_offset(boot, "atomic", "read_committed") == 6,   # 5 records + COMMIT marker
                 what="the first transaction's markers")
        assert end_offset(boot, "atomic", "read_uncommitted") == 11
        p.abort_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send("atomic", f"c{i}".encode(), partition=i % 2)
        p.commit_transaction()
    finally:
        p.close()
    got = committed_values(boot, "atomic", 2)
    assert sorted(got) == sorted([f"a{i}".encode() for i in range(10)] + [f"c{i}".encode() for i in range(10)])
    assert end_offset(boot, "atomic", "read_committed") == end_offset(boot, "atomic", "read_uncommitted") == 18
    c = KafkaConsumer(boot)
    try:
        raw = [r.value for r in c.read_all([("atomic", 0), ("atomic", 1)])]
    finally:
        c.close()
    assert len(raw) == 30   # read_uncommitted also sees the aborted records; never the control batches


def test_send_outside_transaction_and_commit_without_begin_are_refused(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "states")
    p = txn_producer(boot, "states-1")
    try:
        with pytest.raises(KafkaError):
            p.begin_transaction()             # before init_transactions
        p.init_transactions()
        with pytest.raises(KafkaError) as e:
            p.send("states", b"x")
        assert e.value.code == E.INVALID_TXN_STATE
        with pytest.raises(KafkaError):
            p.commit_transaction()
        p.begin_transaction()
        p.commit_transaction()                # an empty transaction commits without the coordinator
    finally:
        p.close()


def _worker(boot, *args):
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.Popen([sys.executable, "-m", "tests.integration.txn_worker", *args, "--bootstrap", boot],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _read_until(proc, marker, timeout=60):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.strip() == marker:
            return lines
    raise AssertionError(f"worker did not print {marker}: {lines}")


def test_zombie_fencing_paused_producer(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "zombie", 2)
    zombie = _worker(boot, "producer", "--transactional-id", "zombie-1", "--topic", "zombie", "--partitions", "2",
                     "--count", "20", "--prefix", "z")
    try:
        first = json.loads(_read_until(zombie, "SENT")[-2])
        os.kill(zombie.pid, signal.SIGSTOP)                      # the zombie: paused mid-transaction
        p = txn_producer(boot, "zombie-1")
        try:
            p.init_transactions()                               # fences the zombie, aborts its transaction
            assert p.producer_id == first["producer_id"] and p.producer_epoch > first["epoch"]
            p.begin_transaction()
            for i in range(10):
                p.send("zombie", f"n{i}".encode(), partition=i % 2)
            p.commit_transaction()
        finally:
            p.close()
        os.kill(zombie.pid, signal.SIGCONT)
        zombie.stdin.write("commit\n")
        zombie.stdin.flush()
        out = json.loads(_read_until(zombie, "", timeout=60)[0] if False else zombie.stdout.readline())
        zombie.wait(30)
    finally:
        if zombie.poll() is None:
            os.kill(zombie.pid, signal.SIGCONT)
            zombie.kill()
    assert out["send_error"] in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), out
    assert out["commit_error"] in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), out
    got = committed_values(boot, "zombie", 2)
    assert sorted(got) == sorted(f"n{i}".encode() for i in range(10))   # none of the zombie's records


def test_transaction_timeout_aborts_and_lso_moves_on(make_cluster):
    rt = make_cluster(txn_coordinator_args=["--transaction-check-interval-ms", "200"])
    boot = rt.bootstrap_all()
    h.new_topic(boot, "slow")
    p = txn_producer(boot, "slow-1", transaction_timeout_ms=1500)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send("slow", f"s{i}".encode())
        p.flush()
        assert end_offset(boot, "slow", "read_committed") == 0        # held back by the open transaction
        h.wait_for(lambda: end_offset(boot, "slow", "read_committed") == 6, timeout=20,
                 what="the coordinator to abort the timed-out transaction")
        with pytest.raises(KafkaError) as e:
            p.commit_transaction()
        assert e.value.code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH)
    finally:
        p.close()
    assert committed_values(boot, "slow") == []
    q = txn_producer(boot, "slow-1")
    try:
        q.init_transactions()
        q.begin_transaction()
        q.send("slow", b"after")
        q.commit_transaction()
    finally:
        q.close()
    assert committed_values(boot, "slow") == [b"after"]


def test_coordinator_failover_mid_stream(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "fo", 2)
    owner = coordinator_node(boot, "fo-1")
    p = txn_producer(boot, "fo-1")
    expected = []
    try:
        p.init_transactions()
        for t in range(12):
            p.begin_transaction()
            for i in range(5):
                v = f"t{t}-{i}".encode()
                p.send("fo", v, partition=i % 2)
                expected.append(v)
            if t == 5:
                p.flush()
                cluster.kill(owner)           # mid-transaction: the other coordinator takes over and replays
            p.commit_transaction(timeout=60)
    finally:
        p.close()
    assert coordinator_node(boot, "fo-1") != owner
    assert sorted(committed_values(boot, "fo", 2)) == sorted(expected)
    cluster.start(owner)


def test_id_expiration_forgets_an_idle_transactional_id(make_cluster):
    rt = make_cluster(txn_coordinator_args=["--transactional-id-expiration-ms", "1000",
                                            "--transaction-check-interval-ms", "200"])
    boot = rt.bootstrap_all()
    h.new_topic(boot, "idle")
    p = txn_producer(boot, "idle-1")
    try:
        p.init_transactions()
        first = p.producer_id
    finally:
        p.close()
    time.sleep(2.0)
    q = txn_producer(boot, "idle-1")
    try:
        q.init_transactions()
        assert q.producer_id != first and q.producer_epoch == 0     # "PID eviction" in *Idempotent producers and sequence numbers*
    finally:
        q.close()


def test_coordinator_and_marker_rules_on_the_wire(cluster):
    from eoslab.v1 import common_pb2, txn_pb2, txn_pb2_grpc
    from eoslab.common import rpc
    boot = cluster.bootstrap_all()
    md = h.new_topic(boot, "wire")
    tc = None

    def init(pid=-1, epoch=-1, timeout_ms=10000):
        nonlocal tc
        for _ in range(100):
            r = h.broker_stub(boot.split(",")[0]).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                key_type=broker_pb2.TRANSACTION, key="wire-1"), timeout=5)
            if r.error != E.NONE:             # e.g. COORDINATOR_NOT_AVAILABLE while ownership settles
                time.sleep(0.1)
                continue
            tc = txn_pb2_grpc.TransactionCoordinatorStub(rpc.channel(f"{r.host}:{r.port}"))
            x = tc.InitProducerId(broker_pb2.InitProducerIdRequest(
                transactional_id="wire-1", transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch),
                timeout=10)
            if x.error not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR):
                return x
            time.sleep(0.1)
        raise AssertionError("no transaction coordinator answered InitProducerId for wire-1")

    assert init(timeout_ms=10**9).error == E.INVALID_TRANSACTION_TIMEOUT
    first = init()
    assert first.error == E.NONE and first.producer_epoch == 0
    again = init()
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)          # every init bumps
    assert init(first.producer_id, 0).error == E.PRODUCER_FENCED     # the replaced instance cannot come back
    kip360 = init(first.producer_id, 1)
    assert kip360.error == E.NONE and kip360.producer_epoch == 2                         # KIP-360: current pair
    retry = init(first.producer_id, 1)
    assert retry.error == E.NONE and retry.producer_epoch == 2                           # a retry of that bump
    assert init(first.producer_id, 0).error == E.PRODUCER_FENCED                         # a stale pair
    pid, epoch = kip360.producer_id, kip360.producer_epoch

    def add(p, e):
        return tc.AddPartitionsToTxn(txn_pb2.AddPartitionsToTxnRequest(
            transactional_id="wire-1", producer_id=p, producer_epoch=e,
            partitions=[common_pb2.TopicPartition(topic="wire", partition=0)]), timeout=10).error
    assert tc.EndTxn(txn_pb2.EndTxnRequest(transactional_id="wire-1", producer_id=pid, producer_epoch=epoch,
                                           committed=True), timeout=10).error == E.INVALID_TXN_STATE  # Empty
    assert add(pid + 1, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    assert add(pid, epoch - 1) == E.PRODUCER_FENCED
    assert add(pid, epoch) == E.NONE

    leader = h.broker_stub(h.leader_address(md, "wire"))

    def marker(coordinator_epoch, producer_epoch):
        x = leader.WriteTxnMarkers(broker_pb2.WriteTxnMarkersRequest(markers=[broker_pb2.WritableTxnMarker(
            producer_id=pid, producer_epoch=producer_epoch, committed=False, coordinator_epoch=coordinator_epoch,
            partitions=[common_pb2.TopicPartition(topic="wire", partition=0)])]), timeout=30)
        return x.markers[0].partitions[0].error
    assert marker(50, epoch) == E.NONE
    assert marker(49, epoch) == E.TRANSACTION_COORDINATOR_FENCED                        # an older coordinator
    assert marker(50, epoch - 1) == E.INVALID_PRODUCER_EPOCH                            # an older producer epoch


def test_find_coordinator_while_the_only_coordinator_is_down(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=1)
    boot = rt.bootstrap_all()
    assert coordinator_node(boot, "lonely") == "txn-coordinator-1"
    rt.kill("txn-coordinator-1")
    stub = h.broker_stub(boot.split(",")[0])

    def unowned():
        r = stub.FindCoordinator(broker_pb2.FindCoordinatorRequest(key_type=broker_pb2.TRANSACTION, key="lonely"),
                                 timeout=5)
        assert r.error != E.NONE or r.node_id == 1        # never a coordinator with node id -1
        return r.error == E.COORDINATOR_NOT_AVAILABLE
    h.wait_for(unowned, timeout=30, what="the dead coordinator's partitions to be unowned")
    rt.start("txn-coordinator-1")
    assert coordinator_node(boot, "lonely") == "txn-coordinator-1"


def test_end_txn_waits_for_an_add_partitions_in_flight(cluster):
    """The abort's EndTxn must not overtake the sender's AddPartitionsToTxn: on 4.0 the EndTxn bumps the
    epoch, and the late AddPartitionsToTxn at the old epoch would be PRODUCER_FENCED, killing a producer
    that did nothing wrong (seen in CI as a flaky KIP-447 test)."""
    from clients.producer.transactions import ConsumerGroupMetadata
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "inflight", 1)
    p = txn_producer(boot, "inflight-1")
    try:
        p.init_transactions()
        call = p.txn.coordinator.call

        picked_up = threading.Event()

        def late_from_the_sender(fn, timeout):  # the sender's request (built at epoch 0) is slow on the wire
            if threading.current_thread() is p.sender:
                picked_up.set()
                time.sleep(1.5)
            return call(fn, timeout)
        p.txn.coordinator.call = late_from_the_sender
        p.begin_transaction()
        p.send("inflight", b"a")
        assert picked_up.wait(30), "the sender never sent AddPartitionsToTxn"
        with pytest.raises(KafkaError):          # a group nobody joined: the transaction must abort
            p.send_offsets_to_transaction({("inflight", 0): 1}, ConsumerGroupMetadata("nobody", 3, "ghost"))
        p.abort_transaction()
        p.txn.coordinator.call = call
        p.begin_transaction()
        p.send("inflight", b"b").result(10)
        p.commit_transaction()
    finally:
        p.close()
    assert committed_values(boot, "inflight") == [b"b"]
