"""The producer's reactions by Kafka release, against real processes: delivery timeout of in-flight batches and
unresolved sequences, KIP-360's abort with an epoch bump, and what stays fatal on 0.11."""
import time

import pytest

from eoslab.common.errors import E, KafkaError
from clients.producer import KafkaProducer, ProducerConfig
from clients.producer.transaction_manager import State
from tests import helpers as h
from tests.integration.test_transactions import committed_values

pytestmark = pytest.mark.integration


def _version_cluster(make_cluster, version, **kw):
    flag = [f"--kafka-version={version}"]
    return make_cluster(brokers=1, controllers=1, broker_args=flag, txn_coordinator_args=flag, **kw)


def _error(fut, timeout=30.0) -> KafkaError:
    e = fut.exception(timeout=timeout)
    assert isinstance(e, KafkaError), e
    return e


def test_delivery_timeout_expires_in_flight_batches_and_bumps_only_an_unresolved_sequence(make_cluster):
    rt = make_cluster(brokers=1, controllers=1, session_timeout_ms=10000)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "expiry")
    leader = h.leader_address(md, "expiry")
    broker = next(n.name for n in rt.info().nodes if n.address == leader)
    p = KafkaProducer(boot, ProducerConfig(linger_ms=0, request_timeout_ms=6000, delivery_timeout_ms=1500,
                                           retry_backoff_ms=20))
    try:
        assert p.send("expiry", b"warm", partition=0).result(timeout=30).base_sequence == 0
        # 1. the answer comes late: the batch expires in flight, then its answer resolves the sequence
        rt.pause(broker)
        try:
            late = p.send("expiry", b"late", partition=0)
            assert _error(late, 10).code == E.REQUEST_TIMED_OUT
            assert p.metrics()["timeouts"] == 0          # expired while its request was still outstanding
            nxt = p.send("expiry", b"next", partition=0)
        finally:
            rt.resume(broker)
        m = nxt.result(timeout=30)
        assert (m.producer_epoch, m.base_sequence) == (0, 2) and p.metrics()["epoch_bumps"] == 0
        # 2. the answer never comes: the sequence stays unresolved, so the epoch is bumped before the next batch
        h.drop_responses(leader, "expiry", count=1)
        lost = p.send("expiry", b"lost", partition=0)
        assert _error(lost, 10).code == E.REQUEST_TIMED_OUT
        assert p.metrics()["timeouts"] == 0 and p.metrics()["epoch_bumps"] == 0   # unresolved, not yet judged
        h.wait_for(lambda: p.metrics()["epoch_bumps"] == 1, timeout=20,
                   what="the bump once the lost request's connection timed out")
        after = p.send("expiry", b"after", partition=0).result(timeout=30)
        assert (after.producer_epoch, after.base_sequence) == (1, 0) and p.metrics()["epoch_bumps"] == 1
    finally:
        p.close()
    # the expired batches were written: a timeout says "unknown", not "failed"
    assert [r.value for r in h.read_partition(boot, "expiry")] == [b"warm", b"late", b"next", b"lost", b"after"]


@pytest.mark.parametrize("version", ["0.11", "2.5", "4.0"])
def test_expired_batch_in_a_transaction(make_cluster, version):
    """2.5+ (KIP-360): the transaction becomes abortable, the abort bumps the epoch with InitProducerId(pid, epoch)
    and the same producer commits the next one. 0.11: the unresolved sequence is fatal."""
    rt = _version_cluster(make_cluster, version)
    boot = rt.bootstrap_all()
    md = h.new_topic(boot, "txn-expiry")
    leader = h.leader_address(md, "txn-expiry")
    p = KafkaProducer(boot, ProducerConfig.from_props({
        "transactional.id": f"expiry-{version}", "linger.ms": "0", "request.timeout.ms": "4000",
        "delivery.timeout.ms": "1500", "max.in.flight.requests.per.connection": "1"}, kafka_version=version))
    tm = p.transaction_manager
    try:
        p.init_transactions()
        pid, epoch = p.producer_id, p.producer_epoch
        p.begin_transaction()
        h.drop_responses(leader, "txn-expiry", count=1)
        assert _error(p.send("txn-expiry", b"lost", partition=0), 10).code == E.REQUEST_TIMED_OUT
        if version == "0.11":
            h.wait_for(lambda: tm.state is State.FATAL_ERROR, timeout=20, what="the fatal error")
            with pytest.raises(KafkaError):
                p.abort_transaction()
            with pytest.raises(KafkaError):
                p.begin_transaction()
            return
        assert tm.state is State.ABORTABLE_ERROR and tm.epoch_bump_required
        with pytest.raises(KafkaError) as e:
            p.commit_transaction()
        assert e.value.code == E.TRANSACTION_ABORTABLE
        p.abort_transaction()
        assert tm.state is State.READY and p.producer_id == pid and p.producer_epoch > epoch
        assert p.metrics()["epoch_bumps"] == 1
        # the lost request still holds the one in-flight slot until request.timeout.ms closes its connection
        h.wait_for(lambda: p.metrics()["timeouts"] == 1, timeout=20, what="the lost request's timeout")
        p.begin_transaction()
        m = p.send("txn-expiry", b"kept", partition=0).result(timeout=30)
        assert m.base_sequence == 0 and m.producer_epoch == p.producer_epoch
        p.commit_transaction()
    finally:
        p.close()
    assert committed_values(boot, "txn-expiry") == [b"kept"]


@pytest.mark.parametrize("version,state", [("0.11", State.FATAL_ERROR), ("2.5", State.ABORTABLE_ERROR)])
def test_invalid_producer_epoch_on_produce(make_cluster, version, state):
    """A producer fenced by a newer instance learns it from a produce: abortable from 2.5 (the abort then hears
    PRODUCER_FENCED from the coordinator and is fatal), fatal at once on 0.11."""
    rt = _version_cluster(make_cluster, version)
    boot = rt.bootstrap_all()
    h.new_topic(boot, "fenced")
    props = {"transactional.id": "fenced-1", "linger.ms": "0", "request.timeout.ms": "3000",
             "max.in.flight.requests.per.connection": "1"}
    old = KafkaProducer(boot, ProducerConfig.from_props(props, kafka_version=version))
    new = KafkaProducer(boot, ProducerConfig.from_props(props, kafka_version=version))
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("fenced", b"a", partition=0).result(timeout=30)
        new.init_transactions()                      # bumps the epoch and aborts old's transaction
        assert _error(old.send("fenced", b"b", partition=0)).code == E.INVALID_PRODUCER_EPOCH
        tm = old.transaction_manager
        assert tm.state is state
        with pytest.raises(KafkaError) as e:
            old.abort_transaction()
        assert e.value.code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH)
        assert tm.state is State.FATAL_ERROR
        new.begin_transaction()
        new.send("fenced", b"c", partition=0)
        new.commit_transaction()
    finally:
        old.close()
        new.close()
    assert committed_values(boot, "fenced") == [b"c"]


def test_unknown_producer_id_bumps_the_idempotent_epoch_on_2_5_and_is_fatal_on_0_11(make_cluster):
    """The broker forgets an idle producer (producer.id.expiration.ms) and answers its next sequence with
    UNKNOWN_PRODUCER_ID (1.0-2.4 brokers; forced here): a 4.0 client bumps its epoch and writes from sequence 0
    (KIP-360); a 0.11 client fails."""
    rt = make_cluster(brokers=1, controllers=1, broker_args=[
        "--unknown-producer=UNKNOWN_PRODUCER_ID", "--producer-id-expiration-ms=300",
        "--producer-id-expiration-check-interval-ms=100"])
    boot = rt.bootstrap_all()
    h.new_topic(boot, "forgotten", 2)
    new = KafkaProducer(boot, ProducerConfig.from_props({"linger.ms": "0"}, kafka_version="4.0"))
    old = KafkaProducer(boot, ProducerConfig.from_props({"linger.ms": "0", "enable.idempotence": "true",
                                                         "max.in.flight.requests.per.connection": "1"},
                                                        kafka_version="0.11"))
    try:
        assert new.send("forgotten", b"n0", partition=0).result(timeout=30).base_sequence == 0
        assert old.send("forgotten", b"o0", partition=1).result(timeout=30).base_sequence == 0
        time.sleep(1.5)                                  # idle past producer.id.expiration.ms: both forgotten
        m = new.send("forgotten", b"n1", partition=0).result(timeout=30)
        assert (m.producer_epoch, m.base_sequence) == (1, 0) and new.metrics()["epoch_bumps"] == 1
        assert _error(old.send("forgotten", b"o1", partition=1)).code == E.UNKNOWN_PRODUCER_ID
        assert old.transaction_manager.state is State.FATAL_ERROR
        with pytest.raises(KafkaError):
            old.send("forgotten", b"o2", partition=1)
    finally:
        new.close()
        old.close()
    assert [r.value for r in h.read_partition(boot, "forgotten", 0)] == [b"n0", b"n1"]
    assert [r.value for r in h.read_partition(boot, "forgotten", 1)] == [b"o0"]


def test_unknown_producer_id_in_a_transaction_aborts_with_a_bump_on_2_5_and_is_fatal_on_0_11(make_cluster):
    """Between two transactions the broker forgets the idle producer and answers its next sequence with
    UNKNOWN_PRODUCER_ID: a 2.5 client aborts, bumps its epoch with InitProducerId(pid, epoch) and commits the
    next transaction from sequence 0 (KIP-360); a 0.11 client is fatal."""
    flag = "--kafka-version=2.5"
    rt = make_cluster(brokers=1, controllers=1, txn_coordinator_args=[flag], broker_args=[
        flag, "--unknown-producer=UNKNOWN_PRODUCER_ID", "--producer-id-expiration-ms=300",
        "--producer-id-expiration-check-interval-ms=100"])
    boot = rt.bootstrap_all()
    h.new_topic(boot, "txn-forgotten", 2)
    props = {"linger.ms": "0", "request.timeout.ms": "3000", "max.in.flight.requests.per.connection": "1"}
    new = KafkaProducer(boot, ProducerConfig.from_props({**props, "transactional.id": "f-new"}, kafka_version="2.5"))
    old = KafkaProducer(boot, ProducerConfig.from_props({**props, "transactional.id": "f-old"}, kafka_version="0.11"))
    try:
        for p, part in ((new, 0), (old, 1)):
            p.init_transactions()
            p.begin_transaction()
            p.send("txn-forgotten", b"first", partition=part)
            p.commit_transaction()
        epoch = new.producer_epoch
        time.sleep(1.5)                                  # idle past producer.id.expiration.ms: both forgotten
        for p, part in ((new, 0), (old, 1)):
            p.begin_transaction()
            assert _error(p.send("txn-forgotten", b"lost", partition=part)).code == E.UNKNOWN_PRODUCER_ID
        assert old.transaction_manager.state is State.FATAL_ERROR
        assert new.transaction_manager.state is State.ABORTABLE_ERROR
        new.abort_transaction()
        assert new.producer_epoch == epoch + 1 and new.transaction_manager.state is State.READY
        new.begin_transaction()
        m = new.send("txn-forgotten", b"again", partition=0).result(timeout=30)
        assert (m.base_sequence, m.producer_epoch) == (0, epoch + 1)
        new.commit_transaction()
    finally:
        new.close()
        old.close()
    assert committed_values(boot, "txn-forgotten", 2) == [b"first", b"again", b"first"]
