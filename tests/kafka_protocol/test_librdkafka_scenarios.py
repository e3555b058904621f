"""The seeds' producer scenarios with librdkafka (confluent-kafka) as the producer, on a real local cluster:
five requests in flight with the first ACK lost, a restart without transactional.id, and zombie fencing of
a paused transactional producer."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tests import helpers as h

pytestmark = pytest.mark.integration
pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def kcluster(eoslab_home):
    from cluster.local import LocalRuntime
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-kr-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=3, controllers=1)
    rt.up()
    yield rt
    rt.down()


def _topic(boot, name):
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=30).values():
        f.result(30)
    return name


def _read(boot, topic, isolation="read_uncommitted", settle_s=2.0):
    c = Consumer({"bootstrap.servers": boot, "group.id": f"r-{uuid.uuid4().hex[:6]}", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, last = [], time.monotonic()
    while time.monotonic() - last < settle_s:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
            last = time.monotonic()
    c.close()
    return got


def _leader(info, topic):
    from clients.metadata import ClusterMetadata
    return h.leader_address(ClusterMetadata(info.bootstrap), topic)


def test_five_in_flight_with_the_first_ack_lost_writes_each_record_once(kcluster):
    info = kcluster.info()
    topic = _topic(info.kafka_bootstrap, "rd-inflight")
    leader = _leader(info, topic)
    h.drop_responses(leader, topic, count=1)
    p = Producer({"bootstrap.servers": info.kafka_bootstrap, "enable.idempotence": True, "acks": "all",
                  "max.in.flight.requests.per.connection": 5, "batch.num.messages": 1, "linger.ms": 0,
                  "request.timeout.ms": 2000})
    for i in range(25):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(30) == 0
    assert h.faults_applied(leader) == 1
    assert _read(info.kafka_bootstrap, topic) == [f"v{i}" for i in range(25)]


def test_a_restart_without_transactional_id_resends_a_written_record_as_a_duplicate(kcluster):
    info = kcluster.info()
    topic = _topic(info.kafka_bootstrap, "rd-restart")
    leader = _leader(info, topic)
    h.drop_responses(leader, topic, count=1000)          # every answer lost: the write happens, no ACK comes
    first = Producer({"bootstrap.servers": info.kafka_bootstrap, "enable.idempotence": True, "acks": "all",
                      "request.timeout.ms": 1000, "message.timeout.ms": 3000})
    errors = []
    first.produce(topic, b"order-1", on_delivery=lambda err, msg: errors.append(err))
    first.flush(10)
    assert errors and errors[0] is not None          # the application saw a timeout ...
    del first                                        # ... and restarts its producer (a new producer id)
    from eoslab.v1 import faults_pb2, faults_pb2_grpc
    from eoslab.common import rpc
    faults_pb2_grpc.FaultInjectorStub(rpc.channel(leader)).ClearFaults(faults_pb2.ClearFaultsRequest(), timeout=5)
    second = Producer({"bootstrap.servers": info.kafka_bootstrap, "enable.idempotence": True, "acks": "all"})
    second.produce(topic, b"order-1")                # the application's retry
    assert second.flush(30) == 0
    assert _read(info.kafka_bootstrap, topic) == ["order-1", "order-1"]


ZOMBIE = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    boot, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": boot, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"zombie-1")
    p.flush(30)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        p.produce(topic, b"zombie-2")
        p.commit_transaction(30)
        print("committed", flush=True)
    except Exception as e:
        err = e.args[0]
        kind = "fatal" if err.fatal() else "abortable" if err.txn_requires_abort() else "other"
        try:
            p.abort_transaction(30)
            after = "aborted"
        except Exception as e2:
            after = "fatal" if e2.args[0].fatal() else "other"
        print("refused", kind, err.name(), after, flush=True)
""")


def test_a_paused_transactional_producer_is_fenced_by_its_successor(kcluster):
    info = kcluster.info()
    boot = info.kafka_bootstrap
    topic = _topic(boot, "rd-zombie")
    tid = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = subprocess.Popen([sys.executable, "-c", ZOMBIE, boot, topic, tid], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert zombie.stdout.readline().strip() == "ready"
        os.kill(zombie.pid, signal.SIGSTOP)          # a GC pause: the instance is presumed dead
        successor = Producer({"bootstrap.servers": boot, "transactional.id": tid})
        successor.init_transactions(30)              # fences the zombie and aborts its open transaction
        successor.begin_transaction()
        successor.produce(topic, b"successor")
        successor.commit_transaction(30)
        os.kill(zombie.pid, signal.SIGCONT)
        zombie.stdin.write("go\n")
        zombie.stdin.flush()
        verdict = zombie.stdout.readline().split()
        # Its write is refused: the leader's verification finds the epoch fenced and answers
        # INVALID_PRODUCER_EPOCH on the produce path, as Kafka's AddPartitionsToTxnManager does, which
        # librdkafka raises as fatal (_FENCED); the abort that follows cannot succeed: it can never commit.
        assert verdict[:3] == ["refused", "fatal", "_FENCED"] and verdict[3] != "aborted", verdict
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
        zombie.kill()
        zombie.wait(10)
    assert _read(boot, topic, "read_committed") == ["successor"]
    assert "zombie-2" not in _read(boot, topic, "read_uncommitted")
