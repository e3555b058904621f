"""Properties of log compaction over random histories (hypothesis): whatever the keys, tombstones, aborted
transactions, segment size and map size, and however many rounds run, cleaning never changes what a
read_committed reader learns about the latest value of any key, never changes a kept record, never moves
an offset or the log end, and makes each key appear at most once below what the rounds covered."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from services.broker.log_cleaner import Cleaner
from services.broker.log_cleaner_manager import log_to_clean
from services.broker.log_config import LogConfig
from services.broker.partition import Partition

pytestmark = pytest.mark.fast

WRITE = st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
                  st.one_of(st.none(), st.binary(min_size=1, max_size=40)),      # None: a tombstone
                  st.sampled_from(["plain", "committed", "aborted"]))


def _latest_committed(p) -> dict:
    """key -> value of the last committed write of each key as a read_committed reader sees the log."""
    aborted = {(t.producer_id, o) for t in p.aborted_transactions(0, p.log.log_end_offset)
               for o in range(t.first_offset, t.last_offset + 1)}
    out = {}
    for b in p.log.batches():
        if b.is_control or (b.is_transactional and (b.producer_id, b.base_offset) in aborted):
            continue
        for _, k, v, *_ in rb.records_with_offsets(b):
            out[k] = v
    return out


def _records(p) -> dict:
    return {o: (k, v) for b in p.log.batches() for o, k, v, *_ in rb.records_with_offsets(b)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(WRITE, min_size=1, max_size=60), segment_bytes=st.integers(150, 900),
       map_keys=st.integers(1, 6), rounds=st.integers(1, 3))
def test_cleaning_keeps_every_keys_latest_committed_value_and_every_kept_record(tmp_path_factory, writes,
                                                                                 segment_bytes, map_keys, rounds):
    clock = MockTime()
    config = LogConfig(segment_bytes=segment_bytes).apply_topic_configs({"cleanup.policy": "compact"})
    p = Partition("t", 0, str(tmp_path_factory.mktemp("log")), broker_id=1, config=config, time=clock)
    p.make_leader(0, [1], [1], 0)
    epochs = {}
    for i, (key, value, kind) in enumerate(writes):
        if kind == "plain":
            assert p.append_records_to_leader(rb.build_batch([(key, value, 1_000 + i)]), acks=1).error == 0
            continue
        pid = 100 + i                               # one transaction per producer
        batch = rb.build_batch([(key, value, 1_000 + i)], producer_id=pid, producer_epoch=0, base_sequence=0,
                               transactional=True)
        assert p.append_records_to_leader(batch, acks=1).error == 0
        assert p.append_txn_marker(pid, 0, 0, committed=kind == "committed").error == 0
        epochs[pid] = kind
    before_latest, before = _latest_committed(p), _records(p)
    end = p.log.log_end_offset
    cleaner = Cleaner(clock, dedupe_buffer_size=24 * map_keys, load_factor=1.0)
    covered = 0
    for _ in range(rounds):
        stats = cleaner.clean(log_to_clean(p, clock.milliseconds()))
        covered = max(covered, stats.end_offset)
    after = _records(p)
    assert _latest_committed(p) == before_latest
    assert all(before[o] == r for o, r in after.items()), "a kept record is the one written at its offset"
    assert p.log.log_end_offset == end
    below = [k for b in p.log.batches() if not b.is_control
             for o, k, *_ in rb.records_with_offsets(b) if o < covered]
    assert len(below) == len(set(below)), "a key twice below the cleaned range"
    p.close()
