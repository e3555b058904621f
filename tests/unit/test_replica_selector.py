"""KIP-392 fetch from follower, on the real ReplicaManager in-process with a mock clock: Kafka's
RackAwareReplicaSelector rules, ReplicaManager.findPreferredReadReplica's candidates (in-sync followers
whose logs hold the fetch offset), the leader's answer (preferred_read_replica and no records), and a
follower serving a consumer's fetch that carries client metadata (Fetch v11+) up to its own high
watermark, while one without it is refused as before."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager
from services.broker.replica_selector import RACK_AWARE, RackAwareReplicaSelector, ReplicaView, selector

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def view(broker_id, rack, leo, lag_ms=0):
    return ReplicaView(broker_id, rack, leo, lag_ms)


def test_the_rack_aware_selector_prefers_the_leader_then_the_most_caught_up_replica_in_the_clients_rack():
    s = RackAwareReplicaSelector()
    leader = view(1, "a", 10)
    two, three, four = view(2, "b", 8, 50), view(3, "b", 10, 900), view(4, "b", 10, 100)
    assert s.select(None, leader, [leader, two, three]) == leader           # no client rack: the leader
    assert s.select("", leader, [leader, two, three]) == leader
    assert s.select("z", leader, [leader, two, three]) == leader           # nobody in its rack: the leader
    assert s.select("a", leader, [leader, two]) == leader                  # the leader is in its rack
    assert s.select("b", leader, [leader, two, three]) == three            # the highest log end offset
    assert s.select("b", leader, [leader, two, three, four]) == four       # a tie: caught up most recently


def test_replica_selector_class_names_kafkas_selector_or_none():
    assert selector("") is None and selector(None) is None
    assert isinstance(selector(RACK_AWARE), RackAwareReplicaSelector)
    with pytest.raises(ValueError):
        selector("com.example.Mine")


def metadata(racks: dict) -> MetadataCache:
    md = MetadataCache()
    um = broker_pb2.UpdateMetadataRequest(controller_id=1, controller_epoch=1)
    for b, rack in racks.items():
        um.live_brokers.add(broker_id=b, host="127.0.0.1", port=9000 + b, rack=rack or "")
    md.update(um)
    return md


def lead(rm, leader, isr=(1, 2, 3)):
    req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
    req.partition_states.add(topic="t", partition=0, leader=leader, leader_epoch=0, isr=list(isr),
                             replicas=[1, 2, 3], zk_version=0)
    assert rm.become_leader_or_follower(req).error == E.NONE


def produce(rm, n):
    for _ in range(n):
        r = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
        r.partitions.add(topic="t", partition=0, batch=rb.build_batch([(None, b"v", 0)]))
        assert rm.append_records(r).partitions[0].error == E.NONE


def fetch(rm, offset=0, rack="", client_metadata=True, replica_id=-1):
    return rm.fetch(broker_pb2.FetchRequest(
        replica_id=replica_id, max_wait_ms=0, max_bytes=1 << 20, client_metadata=client_metadata, rack_id=rack,
        partitions=[broker_pb2.FetchPartition(topic="t", partition=0, fetch_offset=offset,
                                              partition_max_bytes=1 << 20)])).partitions[0]


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def leader_rm(tmp_path, clock):
    rm = ReplicaManager(1, str(tmp_path), LogConfig(), metadata({1: "a", 2: "b", 3: "c"}), time=clock,
                        replica_selector=RackAwareReplicaSelector())
    lead(rm, 1)
    produce(rm, 4)
    yield rm
    rm.shutdown()


def test_the_leader_sends_a_consumer_in_a_followers_rack_to_that_follower_without_records(leader_rm, clock):
    p = leader_rm.partitions[("t", 0)]
    p.record_follower_fetch(2, 4, 0)             # follower 2 (rack b) holds 0..3
    p.record_follower_fetch(3, 2, 0)             # follower 3 (rack c) only 0..1
    r = fetch(leader_rm, offset=1, rack="b")
    assert (r.error, r.preferred_read_replica, len(r.batches)) == (E.NONE, 2, 0)
    assert r.high_watermark == p.high_watermark and r.log_start_offset == 0
    assert fetch(leader_rm, offset=3, rack="c").HasField("preferred_read_replica") is False   # 3 lacks offset 3
    assert fetch(leader_rm, offset=1, rack="c").preferred_read_replica == 3
    assert p.high_watermark == 2
    assert len(fetch(leader_rm, offset=0, rack="a").batches) == 2         # the leader's own rack: it serves
    r = fetch(leader_rm, offset=0, rack="b", client_metadata=False)        # Fetch before v11: the leader serves
    assert not r.HasField("preferred_read_replica") and len(r.batches) == 2


def test_a_follower_out_of_the_isr_is_never_preferred(tmp_path, clock):
    rm = ReplicaManager(1, str(tmp_path), LogConfig(), metadata({1: "a", 2: "b", 3: "c"}), time=clock,
                        replica_selector=RackAwareReplicaSelector())
    try:
        lead(rm, 1, isr=(1, 3))
        produce(rm, 2)
        rm.partitions[("t", 0)].record_follower_fetch(2, 2, 0)
        assert not fetch(rm, rack="b").HasField("preferred_read_replica")
    finally:
        rm.shutdown()


def test_without_a_replica_selector_the_leader_always_serves(tmp_path, clock):
    rm = ReplicaManager(1, str(tmp_path), LogConfig(), metadata({1: "a", 2: "b", 3: "c"}), time=clock)
    try:
        lead(rm, 1)
        produce(rm, 2)
        for follower in (2, 3):
            rm.partitions[("t", 0)].record_follower_fetch(follower, 2, 0)
        r = fetch(rm, rack="b")
        assert not r.HasField("preferred_read_replica") and len(r.batches) == 2
    finally:
        rm.shutdown()


def test_a_follower_serves_a_consumer_with_client_metadata_up_to_its_high_watermark(tmp_path, clock):
    rm = ReplicaManager(2, str(tmp_path), LogConfig(), metadata({1: "a", 2: "b", 3: "c"}), time=clock)
    try:
        lead(rm, 1)                               # broker 2 follows broker 1
        p = rm.partitions[("t", 0)]
        batches = []
        for i in range(3):
            b = rb.build_batch([(None, b"v%d" % i, 0)])
            b.base_offset = i
            batches.append(b)
        p.append_as_follower(batches, leader_hw=2)          # the leader's high watermark: 2 of 3
        r = fetch(rm, rack="b")
        assert r.error == E.NONE and [b.base_offset for b in r.batches] == [0, 1] and r.high_watermark == 2
        assert fetch(rm, offset=2, rack="b").batches == []                 # past its high watermark: nothing yet
        assert fetch(rm, offset=4, rack="b").error == E.OFFSET_OUT_OF_RANGE
        assert fetch(rm, rack="b", client_metadata=False).error == E.NOT_LEADER_OR_FOLLOWER
        assert fetch(rm, replica_id=3).error == E.NOT_LEADER_OR_FOLLOWER   # replicas fetch from the leader only
    finally:
        rm.shutdown()
