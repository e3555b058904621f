"""A broker SIGKILLed and restarted keeps its log and its producer state; hostile input is refused."""
import glob
import os

import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from eoslab.common import record_batch as rb
from tests import helpers as h

pytestmark = pytest.mark.integration


def test_killed_broker_keeps_log_and_deduplicates_after_restart(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    boot = rt.info().bootstrap
    md = h.new_topic(boot, "durable")
    leader = h.leader_address(md, "durable")
    pid, epoch = h.init_pid(leader)
    for i in range(5):
        assert h.produce_raw(leader, "durable", h.batch(pid, epoch, i * 2, 2, start=i * 2)).error == E.NONE
    rt.kill("broker-1")
    # a torn write at the tail, as a crash mid-append leaves it
    seg = sorted(glob.glob(os.path.join(rt.dir, "data", "broker-1", "durable-0", "*.log")))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x01\x00garbage")
    rt.start("broker-1")
    rt.wait_ready()
    leader = h.leader_address(md, "durable")
    # the retry of the last batch is still recognised, with its original offset
    r = h.produce_raw(leader, "durable", h.batch(pid, epoch, 8, 2, start=8))
    assert (r.error, r.base_offset) == (E.NONE, 8)
    # and the sequence continues where it stopped
    assert h.produce_raw(leader, "durable", h.batch(pid, epoch, 10, 1, start=10)).base_offset == 10
    assert h.produce_raw(leader, "durable", h.batch(pid, epoch, 12, 1)).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert [r.value for r in h.read_partition(boot, "durable")] == [f"v{i}".encode() for i in range(11)]


def _hostile(pid):
    ok = h.batch(pid, 0, 0, 2)
    neg = rb.build_batch(h.values(1), producer_id=pid, producer_epoch=0, base_sequence=-5)
    count = h.batch(pid, 0, 0, 2)
    count.record_count = 3
    count.crc = rb.crc_of(count)
    crc = h.batch(pid, 0, 0, 2)
    crc.crc ^= 1
    overflow = h.batch(pid, 0, 0, 1)
    overflow.producer_epoch = 40000
    overflow.crc = rb.crc_of(overflow)
    torn = h.batch(pid, 0, 0, 1)
    torn.records = torn.records[:-3]
    torn.crc = rb.crc_of(torn)
    big = rb.build_batch([(None, b"x" * (2 << 20), 0)], producer_id=pid, producer_epoch=0, base_sequence=0)
    control = rb.build_batch(h.values(1), producer_id=pid, producer_epoch=0, base_sequence=0, control=True)
    return ok, [("negative sequence", neg, E.INVALID_RECORD), ("record count", count, E.INVALID_RECORD),
                ("crc", crc, E.CORRUPT_MESSAGE), ("epoch overflow", overflow, E.INVALID_REQUEST),
                ("torn records", torn, E.CORRUPT_MESSAGE), ("oversize", big, E.MESSAGE_TOO_LARGE),
                ("control batch from a client", control, E.INVALID_RECORD)]


def test_hostile_produce_gets_kafka_errors_and_loses_nothing(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    boot = rt.info().bootstrap
    md = h.new_topic(boot, "hostile")
    leader = h.leader_address(md, "hostile")
    pid, _ = h.init_pid(leader)
    ok, bad = _hostile(pid)
    assert h.produce_raw(leader, "hostile", ok).base_offset == 0
    for what, b, code in bad:
        r = h.produce_raw(leader, "hostile", b)
        assert r.error == code, f"{what}: got {E.Name(r.error)}, want {E.Name(code)}"
        assert r.error_message, what
    assert h.produce_raw(leader, "hostile", ok, partition=0).base_offset == 0       # still deduplicated
    assert h.produce_raw(leader, "nope", ok).error == E.UNKNOWN_TOPIC_OR_PARTITION
    assert h.produce_raw(leader, "hostile", ok, partition=7).error == E.UNKNOWN_TOPIC_OR_PARTITION
    r = h.broker_stub(leader).Produce(broker_pb2.ProduceRequest(acks=5, partitions=[
        broker_pb2.PartitionProduceData(topic="hostile", partition=0, batch=ok)]), timeout=5)
    assert r.partitions[0].error == E.INVALID_REQUIRED_ACKS
    r = h.broker_stub(leader).Produce(broker_pb2.ProduceRequest(acks=-1, partitions=[
        broker_pb2.PartitionProduceData(topic="hostile", partition=0)]), timeout=5)
    assert r.partitions[0].error == E.INVALID_REQUEST
    assert h.produce_raw(leader, "hostile", h.batch(pid, 0, 2, 1, start=2)).base_offset == 2  # still serving
    assert [r.value for r in h.read_partition(boot, "hostile")] == [b"v0", b"v1", b"v2"]
