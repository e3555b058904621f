"""KIP-890 switches against real processes. Part 1 (the partition leader verifies with the
coordinator that a partition is in the producer's transaction) and part 2 (the epoch is bumped at
every commit/abort). Off: a delayed EndTxn(commit) of an earlier transaction commits the next one,
which the application then aborts, so an aborted record is visible (KAFKA-17754); a late batch of
a finished transaction opens a hanging transaction that stops the LSO for good. On: the delayed
EndTxn is fenced by the epoch, the late batch is refused by the leader's verification."""
import pytest

from clients.consumer import KafkaConsumer
from eoslab.common.errors import E, KafkaError
from clients.producer import KafkaProducer, ProducerConfig
from eoslab.v1 import broker_pb2, txn_pb2, txn_pb2_grpc
from eoslab.common import record_batch as rb
from eoslab.common import rpc
from tests import helpers as h

pytestmark = pytest.mark.integration


def _coordinator(boot, tid):
    r = h.broker_stub(boot.split(",")[0]).FindCoordinator(broker_pb2.FindCoordinatorRequest(
        key_type=broker_pb2.TRANSACTION, key=tid), timeout=5)
    assert r.error == E.NONE
    return txn_pb2_grpc.TransactionCoordinatorStub(rpc.channel(f"{r.host}:{r.port}"))


def _ends(boot, topic):
    out = []
    for iso in ("read_committed", "read_uncommitted"):
        c = KafkaConsumer(boot, isolation_level=iso)
        try:
            out.append(c.end_offsets([(topic, 0)])[(topic, 0)])
        finally:
            c.close()
    return tuple(out)


def _settled(boot, topic):
    """The (LSO, high watermark) once every transaction on the partition is complete (its markers landed)."""
    return h.wait_for(lambda: (lambda e: e if e[0] == e[1] else None)(_ends(boot, topic)), 30,
                      f"the markers on {topic} (LSO = high watermark)")


@pytest.mark.parametrize("kip890", [False, True], ids=["kip890-off", "kip890-on"])
def test_kafka_17754_delayed_end_txn(make_cluster, kip890):
    v = "--kafka-version=4.0" if kip890 else "--kafka-version=3.0"       # KIP-890 parts 1 and 2, or neither
    rt = make_cluster(broker_args=[v], txn_coordinator_args=[v])
    boot = rt.bootstrap_all()
    h.new_topic(boot, "k890")
    p = KafkaProducer(boot, ProducerConfig(transactional_id="k890-1", linger_ms=0, request_timeout_ms=3000))
    abort_error = None
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("k890", b"t1")
        delayed = txn_pb2.EndTxnRequest(transactional_id="k890-1", producer_id=p.producer_id,
                                        producer_epoch=p.producer_epoch, committed=True)
        p.commit_transaction()                        # its EndTxn; a copy of it is "delayed in the network"
        p.begin_transaction()
        p.send("k890", b"t2").result(10)
        late = _coordinator(boot, "k890-1").EndTxn(delayed, timeout=10)   # the delayed copy arrives now
        if late.error == E.NONE:
            _settled(boot, "k890")                    # taken as transaction 2's commit: its markers land
        try:
            p.abort_transaction()                     # the application aborts transaction 2
        except KafkaError as e:
            abort_error = e.code
    finally:
        p.close()
    lso, hw = _settled(boot, "k890")
    c = KafkaConsumer(boot, isolation_level="read_committed")
    c.assign([("k890", 0)])
    try:
        seen = [r.value for r in c.poll(500) + c.poll(500)]
    finally:
        c.close()
    if kip890:
        assert late.error == E.PRODUCER_FENCED                 # an older epoch: fenced
        assert abort_error is None and seen == [b"t1"] and lso == hw
    else:
        assert late.error == E.NONE                            # taken as the commit of transaction 2
        assert abort_error == E.INVALID_TXN_STATE              # the application's abort comes too late
        assert seen == [b"t1", b"t2"]                          # an aborted transaction's record is visible


@pytest.mark.parametrize("verify", [False, True], ids=["part1-off", "part1-on"])
def test_late_produce_after_commit_is_refused_with_verification(make_cluster, verify):
    rt = make_cluster(broker_args=["--kafka-version=3.6" if verify else "--kafka-version=3.0"],
                      txn_coordinator_args=["--kafka-version=3.6" if verify else "--kafka-version=3.0"])
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "late")
    p = KafkaProducer(boot, ProducerConfig(transactional_id="late-1", linger_ms=0))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("late", b"t1").result(10)
        pid, epoch = p.producer_id, p.producer_epoch
        p.commit_transaction()
    finally:
        p.close()
    assert _settled(boot, "late") == (2, 2)                 # t1 and its commit marker
    # a retried batch of the finished transaction (same epoch, next sequence) reaches the leader late
    b = rb.build_batch([(None, b"late", 0)], producer_id=pid, producer_epoch=epoch, base_sequence=1,
                       transactional=True)
    r = h.broker_stub(h.leader_address(md, "late")).Produce(broker_pb2.ProduceRequest(
        acks=-1, transactional_id="late-1", partitions=[broker_pb2.PartitionProduceData(
            topic="late", partition=0, batch=b)]), timeout=10).partitions[0]
    lso, hw = _ends(boot, "late")     # acks=all: an appended batch is under the high watermark at the answer
    if verify:
        assert r.error == E.INVALID_TXN_STATE and lso == hw
    else:
        assert r.error == E.NONE and lso < hw                  # a hanging transaction: the LSO is stuck
