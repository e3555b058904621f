"""A hanging transaction made on a `--kafka-version 3.0` cluster and found and fixed with `eoslab transactions`,
as an operator does it with kafka-transactions.sh (KIP-664), every request over the Kafka listeners.

The hang is KAFKA-12671's shape: a transactional Produce that arrives after its transaction's ABORT marker
(3.0 has no KIP-890 verification) opens a transaction on the partition that its coordinator knows nothing
of, so the last stable offset stands while the high watermark moves.
"""
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from eoslab.common import kafka_records as kr
from eoslab.common import record_batch as rb
from tests import helpers as h
from tests.kafka_protocol.test_listener import _read_frame, _request, _response

pytestmark = pytest.mark.integration


def send(address: str, key: int, version: int, **fields):
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(_request(key, version, 11, **fields))
        corr, r = _response(_read_frame(s), key, version)
    assert corr == 11
    return r


def produce(address, topic, tid, pid, epoch, seq, value: bytes):
    batch = rb.build_batch([(None, value, int(time.time() * 1000))], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=True)
    r = send(address, 0, 9, transactional_id=tid, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": kr.to_kafka(batch)}]}])
    part = r.responses[0].partition_responses[0]
    assert part.error_code.value == 0, part
    return part.base_offset


def offsets(address, topic) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0, from ListOffsets at both isolation levels."""
    out = []
    for iso in (1, 0):
        r = send(address, 2, 7, replica_id=-1, isolation_level=iso, topics=[
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}])
        out.append(r.topics[0].partitions[0].offset)
    return out[0], out[1]


def initialized(address, tid, version=4):
    """(coordinator address, producer id, epoch) of an InitProducerId for `tid`, or None to ask again: as
    Kafka's client, on an error (the id's coordinator still loading or just moved) it finds the
    coordinator again and retries; an answer without a producer id would start no transaction."""
    fc = send(address, 10, 4, key_type=1, coordinator_keys=[tid]).coordinators[0]
    if fc.error_code.value != 0:
        return None
    at = f"{fc.host}:{fc.port}"
    r = send(at, 22, version, transactional_id=tid, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
    return (at, r.producer_id, r.producer_epoch) if r.error_code.value == 0 else None


def eoslab(home, *args, check=True):
    env = dict(os.environ, EOSLAB_HOME=home)
    p = subprocess.run([sys.executable, "-m", "eoslab", *args], env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def table(text: str) -> list[dict]:
    lines = [ln.split("\t")[:-1] for ln in text.splitlines()]
    head = [c.strip() for c in lines[0]]
    return [dict(zip(head, (c.strip() for c in ln))) for ln in lines[1:]]


def test_a_late_produce_after_the_abort_hangs_and_the_toolkit_finds_and_aborts_it(make_cluster, eoslab_home):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    flag = "--kafka-version=3.0"
    rt = make_cluster(broker_args=[flag], txn_coordinator_args=[flag])
    info = rt.info()
    boot = info.kafka_bootstrap
    topic, tid = f"hang-{uuid.uuid4().hex[:6]}", f"hanger-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=boot.split(","))
    admin.create_topics([NewTopic(topic, 1, 3)])
    leader_of = {}

    def leader():
        [t] = admin.describe_topics([topic])
        p = t["partitions"][0]
        leader_of.update(p)
        return p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3
    h.wait_for(leader, timeout=30, what="a leader with a full ISR")
    brokers = {n.node_id: n for n in info.by_role("broker")}
    leader_address = f"{brokers[leader_of['leader_id']].host}:19192"
    follower_id = next(b for b in leader_of["replica_nodes"] if b != leader_of["leader_id"])

    # both transaction coordinators own their __transaction_state partitions before the transaction starts
    # (one that registers later takes partitions over from the other, moving the id's coordinator)
    # (Kafka clients see the brokers that relay to them: the lab's own FindCoordinator names the coordinators)
    from services.common.internal_topics import partition_for
    from tests.integration.test_transactions import coordinator_node
    keys = [next(f"k{i}" for i in range(1000) if partition_for(f"k{i}", 4) == p) for p in range(4)]
    h.wait_for(lambda: len({coordinator_node(rt.bootstrap_all(), k) for k in keys})
               == len(info.by_role("txn-coordinator")), timeout=60, what="every transaction coordinator assigned")

    coordinator, pid, epoch = h.wait_for(lambda: initialized(leader_address, tid), timeout=60,
                                         what="InitProducerId")
    add = send(coordinator, 24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
               v3_and_below_producer_epoch=epoch, v3_and_below_topics=[{"name": topic, "partitions": [0]}])
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value == 0
    assert produce(leader_address, topic, tid, pid, epoch, 0, b"in-txn") == 0
    assert send(coordinator, 26, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                committed=False).error_code.value == 0
    h.wait_for(lambda: offsets(leader_address, topic) == (2, 2), timeout=30, what="the ABORT marker")
    late = produce(leader_address, topic, tid, pid, epoch, 1, b"late")   # after its marker: 3.0 appends it
    assert late == 2
    assert offsets(leader_address, topic) == (2, 3)                      # the hang: LSO stands at 2

    # the id's coordinator now: a transaction coordinator that registered after the test began takes over
    # some __transaction_state partitions (and loads their transactions), as Kafka's coordinators move
    fc = send(leader_address, 10, 4, key_type=1, coordinator_keys=[tid]).coordinators[0]
    listed = table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "list").stdout)
    assert {"TransactionalId": tid, "Coordinator": str(fc.node_id), "ProducerId": str(pid),
            "TransactionState": "CompleteAbort"} in listed
    [described] = table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "describe",
                               "--transactional-id", tid).stdout)
    assert (described["TransactionState"], described["TopicPartitions"], described["CoordinatorId"]) == \
        ("CompleteAbort", "", str(fc.node_id))
    on_follower = table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "describe-producers",
                               "--topic", topic, "--partition", "0", "--broker-id", str(follower_id)).stdout)
    h.wait_for(lambda: table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "describe-producers",
                                    "--topic", topic, "--partition", "0", "--broker-id",
                                    str(follower_id)).stdout)[0]["CurrentTransactionStartOffset"] == "2",
               timeout=15, what="the follower's producer state")
    assert on_follower[0]["ProducerId"] == str(pid)

    hanging = table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "find-hanging", "--topic", topic,
                           "--max-transaction-timeout", "0").stdout)
    assert [(r["Topic"], r["Partition"], r["ProducerId"], r["StartOffset"]) for r in hanging] == \
        [(topic, "0", str(pid), "2")]
    status = json.loads(eoslab(eoslab_home, "cluster", "status", "--name", rt.cluster_name, "--runtime", "local",
                               "--json").stdout)
    leader_name = brokers[leader_of["leader_id"]].name
    assert status["transaction_metrics"][leader_name]["MaxActiveTransactionDuration"] > 0
    assert status["transaction_metrics"][leader_name]["PartitionsWithLateTransactionsCount"] == 0  # not 20 min
    assert status["transaction_metrics"][leader_name]["MaxActiveTransactionPartition"] == f"{topic}-0"
    text = eoslab(eoslab_home, "cluster", "status", "--name", rt.cluster_name, "--runtime", "local").stdout
    assert "PartitionsWithLateTransactionsCount 0" in text

    eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "abort", "--topic", topic, "--partition", "0",
           "--start-offset", "2")
    h.wait_for(lambda: offsets(leader_address, topic) == (4, 4), timeout=30, what="the LSO to move past the hang")
    assert table(eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "find-hanging", "--topic", topic,
                        "--max-transaction-timeout", "0").stdout) == []
    again = eoslab(eoslab_home, "transactions", "--bootstrap-server", boot, "abort", "--topic", topic,
                   "--partition", "0", "--start-offset", "2", check=False)
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "Could not find any open transactions starting at offset 2" in again.stderr
    admin.close()
