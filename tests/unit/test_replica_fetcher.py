"""Follower truncation by leader epoch (KIP-101/279) on a real Partition: the target and when to ask again;
and a fetch answer that a LeaderAndIsr made stale while it was out is dropped, not appended."""
import pytest

from eoslab.common import record_batch as rb
from services.broker.log import StoredBatch
from services.broker.log_config import LogConfig
from services.broker.partition import Partition
from services.broker.replica_fetcher import truncation_target

pytestmark = pytest.mark.fast


def partition_with(tmp_path, epochs_and_counts):
    """A follower partition whose log holds, in order, `count` one-record batches at each leader epoch."""
    p = Partition("t", 0, str(tmp_path), broker_id=2, config=LogConfig())
    for epoch, count in epochs_and_counts:
        for _ in range(count):
            b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)]))
            b.base_offset, b.leader_epoch = p.log_end_offset, epoch
            p.append_as_follower([b.to_proto()], leader_hw=0)
    return p


def converge(p, leader_answer):
    """Play the OffsetsForLeaderEpoch exchange until the follower is done; returns the rounds."""
    rounds = 0
    while True:
        rounds += 1
        epoch, end = leader_answer(p.epochs.latest_epoch)
        target, done = truncation_target(p, epoch, end)
        p.truncate_to(target)
        if done:
            return rounds
        assert rounds < 10


def test_divergence_older_than_the_answered_epoch_takes_a_second_round(tmp_path):
    # follower: epoch 0 at 0..4, epoch 2 at 5..9 (it led in epoch 2, a leader nobody else followed);
    # leader:   epoch 0 at 0..2, epoch 1 at 3..5, epoch 3 from 6 (after crossing unclean elections)
    leader = [(0, 0), (1, 3), (3, 6)]

    def answer(requested):
        e, start = max((x for x in leader if x[0] <= requested), default=(-1, -1))
        nxt = [s for x, s in leader if x > e]
        return e, (nxt[0] if nxt else 9)

    p = partition_with(tmp_path, [(0, 5), (2, 5)])
    rounds = converge(p, answer)
    assert p.log_end_offset == 3          # offsets 3 and 4 of epoch 0 diverge from the leader's epoch 1
    assert rounds == 2
    assert p.epochs.latest_epoch == 0


def test_same_epoch_cuts_at_the_smaller_end(tmp_path):
    p = partition_with(tmp_path, [(0, 3), (1, 4)])
    assert truncation_target(p, 1, 5) == (5, True)
    assert truncation_target(p, -1, -1) == (0, True)      # the leader has no epoch at all


def test_a_restarted_leaders_lso_does_not_pass_an_unreplicated_marker(tmp_path):
    """A transaction at 0..1 and its COMMIT marker at 2, replicated to the followers up to 2 only
    (the marker not yet): after a restart the LSO stays at 0 until the high watermark passes 2."""
    from eoslab.common.control_records import control_record
    cfg = LogConfig(snapshot_interval_batches=1)           # a snapshot after every batch, marker included
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=cfg)
    p.make_leader(0, [1, 2], [1, 2], 0)
    for seq in (0, 1):
        b = rb.build_batch([(None, b"x", 0)], producer_id=7, producer_epoch=0, base_sequence=seq,
                           transactional=True)
        assert p.append_records_to_leader(b, acks=1).error == 0
    p.record_follower_fetch(2, 2)
    assert p.high_watermark == 2
    assert p.append_txn_marker(7, 0, 0, committed=True).base_offset == 2
    assert p.last_stable_offset == 0                      # the marker is not below the high watermark
    p.close()
    again = Partition("t", 0, str(tmp_path), broker_id=1, config=cfg)
    again.make_leader(1, [1, 2], [1, 2], 1)
    again.record_follower_fetch(2, 2)
    assert again.high_watermark == 2
    assert again.last_stable_offset == 0                  # without the replay's unreplicated marker: 2
    again.record_follower_fetch(2, 3)
    assert again.last_stable_offset == 3


def test_a_follower_that_led_an_epoch_without_appending_is_not_stuck_truncating(tmp_path):
    """Seen in a chaos run: broker 2 led epoch 5 from offset 528 and appended nothing before it died; the
    leader (broker 3) has no epoch 4 or 5 and answers epoch 5 with (3, 528). The follower cuts to 528,
    its end already, and must also drop its epoch 5 entry, as Kafka's Log.truncateTo always truncates the
    epoch cache: otherwise it asks for epoch 5 again, gets the same answer, and never fetches (the
    partition's ISR stayed at the leader alone, under min.insync.replicas, for good)."""
    leader = [(0, 0), (2, 1), (3, 528), (16, 528)]

    def answer(requested):
        e, _ = max((x for x in leader if x[0] <= requested), default=(-1, -1))
        nxt = [s for x, s in leader if x > e]
        return e, (nxt[0] if nxt else 528)

    p = partition_with(tmp_path, [(0, 1), (2, 527)])
    p.make_leader(5, [2, 3], [2], 1)                     # led epoch 5 from 528, appended nothing
    assert p.epochs.entries[-1] == (5, 528)
    p.make_follower(3, 16, [2, 3], [3], 2)
    assert converge(p, answer) == 2
    assert p.log_end_offset == 528 and p.epochs.latest_epoch == 2


def test_an_epoch_assigned_where_another_starts_replaces_it(tmp_path):
    """Kafka's LeaderEpochFileCache.assign removes entries that start at or after the new one: a broker
    elected again and again with nothing appended keeps one entry at that offset, the latest epoch."""
    from services.broker.leader_epoch_cache import LeaderEpochFileCache
    c = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in ((0, 0), (2, 1), (3, 528), (6, 528), (8, 528)):
        c.assign(epoch, start)
    assert c.entries == [(0, 0), (2, 1), (8, 528)]
    assert c.end_offset_for(5, 528) == (2, 528)
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(0, 0), (2, 1), (8, 528)]     # as written


# -- a fetch answered after a LeaderAndIsr changed the partition (Kafka's processFetchRequest) ------------
class _Manager:
    broker_id = 2
    time = None

    def __init__(self):
        from eoslab.common.time import MockTime
        self.time = MockTime()


class _Session:
    """Answers each fetch with the leader's batches from the requested offset, after `during(req)` ran:
    what a LeaderAndIsr handled while the fetch was out does to the follower."""
    closed = False

    def __init__(self, leader, during):
        self.leader, self.during = leader, during

    def fetch(self, req):
        from eoslab.v1 import broker_pb2
        self.during(req)
        out = broker_pb2.FetchResponse()
        for rp in req.partitions:
            batches = [b.to_proto() for b in self.leader if b.base_offset >= rp.fetch_offset]
            out.partitions.add(topic=rp.topic, partition=rp.partition, error=0, high_watermark=0,
                               log_start_offset=0, batches=batches)
        return out

    def close(self):
        self.closed = True


def _leader_batches(n, epoch=0):
    out = []
    for i in range(n):
        b = StoredBatch.from_proto(rb.build_batch([(None, b"x", 0)]))
        b.base_offset, b.leader_epoch = i, epoch
        out.append(b)
    return out


def _fetcher(p, during):
    from services.broker.replica_fetcher import ReplicaFetcherThread
    th = ReplicaFetcherThread(_Manager(), leader_id=1)
    th.add(p, leader_epoch=0)
    stub = object()
    th.session, th._session_stub = _Session(_leader_batches(8), during), stub
    return th, stub


def test_a_fetch_answer_after_the_partition_was_truncated_meanwhile_is_dropped(tmp_path):
    p = partition_with(tmp_path, [(0, 6)])
    th, stub = _fetcher(p, during=lambda req: p.truncate_to(4))    # makeFollower cut the log to 4
    st = th.partitions[("t", 0)]
    th._fetch(stub, {("t", 0): st})                # asked at 6, answered from 6: it no longer fits
    assert p.log_end_offset == 4
    th.session.during = lambda req: None
    th._fetch(stub, {("t", 0): st})                # the next fetch asks at 4 and appends
    assert p.log_end_offset == 8


def test_a_fetch_answer_for_a_partition_re_added_meanwhile_is_dropped(tmp_path):
    p = partition_with(tmp_path, [(0, 6)])
    th, stub = _fetcher(p, during=lambda req: None)
    st = th.partitions[("t", 0)]
    th.session.during = lambda req: th.add(p, leader_epoch=1)       # a new LeaderAndIsr: a new fetch state
    th._fetch(stub, {("t", 0): st})
    assert p.log_end_offset == 6 and th.partitions[("t", 0)] is not st
