"""The broker log's flush policy (Kafka's flush.messages, flush.ms, flush on roll and on a clean close),
its recovery point and the way checkpoint files are written. fsync is observed at the OS boundary:
os.fsync is wrapped to record the path of every descriptor it syncs."""
import os

import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from eoslab.common.topics import validate_configs
from services.broker.checkpoints import (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint,
                                         write_hw_checkpoint)
from services.broker.leader_epoch_cache import LeaderEpochFileCache
from services.broker.log import FLUSH_NEVER, StoredBatch, UnifiedLog
from services.broker.log_config import LogConfig
from services.broker.partition import Partition

pytestmark = pytest.mark.fast


@pytest.fixture
def fsyncs(monkeypatch):
    """Every path os.fsync is called on, in order."""
    synced: list[str] = []
    real = os.fsync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(os, "fsync", recording)
    return synced


def _append(log, n=2):
    sb = StoredBatch.from_proto(rb.build_batch([(None, b"v%d" % i, 0) for i in range(n)]))
    sb.base_offset = log.log_end_offset
    log.append(sb)
    return sb


def _segment_syncs(fsyncs):
    return [p for p in fsyncs if p.endswith(".log")]


def test_flush_messages_1_fsyncs_the_segment_on_every_append(tmp_path, fsyncs):
    log = UnifiedLog(str(tmp_path), flush_messages=1)
    seg = log.segments[0].path
    for i in range(1, 4):
        _append(log)
        assert _segment_syncs(fsyncs) == [seg] * i
        assert log.recovery_point == log.log_end_offset == 2 * i
    assert str(tmp_path) in fsyncs, "the new segment file's directory entry is synced with its first flush"
    log.close()


def test_flush_messages_counts_messages_not_batches(tmp_path, fsyncs):
    log = UnifiedLog(str(tmp_path), flush_messages=5)
    _append(log, 2)
    _append(log, 2)
    assert _segment_syncs(fsyncs) == [] and log.unflushed_messages == 4
    _append(log, 2)                       # 6 unflushed >= 5
    assert len(_segment_syncs(fsyncs)) == 1 and log.recovery_point == 6 and log.unflushed_messages == 0
    log.close()


def test_the_default_settings_never_fsync_an_append(tmp_path, fsyncs):
    log = UnifiedLog(str(tmp_path))
    assert log.flush_messages == log.flush_ms == FLUSH_NEVER == 2 ** 63 - 1
    for _ in range(200):
        _append(log)
    assert fsyncs == [] and log.recovery_point == 0
    log.close()                           # an unclean close syncs nothing either
    assert fsyncs == []


def test_a_roll_flushes_the_old_segment_and_moves_the_recovery_point_to_the_new_base(tmp_path, fsyncs):
    log = UnifiedLog(str(tmp_path), segment_bytes=300)
    while len(log.segments) == 1:
        _append(log)
    old, new = log.segments
    assert _segment_syncs(fsyncs) == [old.path], "the old segment, not the new active one"
    assert str(tmp_path) in fsyncs
    assert log.recovery_point == new.base_offset and log.log_end_offset > new.base_offset
    fsyncs.clear()
    while len(log.segments) == 2:
        _append(log)
    assert _segment_syncs(fsyncs) == [new.path], "segments already below the recovery point are not synced again"
    log.close()


def test_a_clean_close_flushes_everything_checkpoints_the_recovery_point_and_leaves_the_marker(tmp_path, fsyncs):
    log = UnifiedLog(str(tmp_path), segment_bytes=300)
    for _ in range(12):
        _append(log)
    active, end = log.segments[-1].path, log.log_end_offset
    assert active not in fsyncs
    log.close(clean=True)
    assert active in fsyncs
    assert read_offset_checkpoint(os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)) == end
    assert os.path.exists(os.path.join(str(tmp_path), CLEAN_SHUTDOWN_FILE))
    assert fsyncs[-1].endswith(CLEAN_SHUTDOWN_FILE), "the marker is written last"


def test_flush_ms_flushes_once_the_interval_passed_on_the_injected_clock(tmp_path, fsyncs):
    clock = MockTime()
    log = UnifiedLog(str(tmp_path), flush_ms=1000, time=clock)
    _append(log)
    assert not log.flush_if_due() and fsyncs == []
    clock.sleep(0.999)
    assert not log.flush_if_due() and fsyncs == []
    clock.sleep(0.001)
    assert log.flush_if_due() and len(_segment_syncs(fsyncs)) == 1 and log.recovery_point == 2
    _append(log)
    assert not log.flush_if_due(), "the interval counts from the last flush"
    log.close()


def test_topic_configs_reach_the_partition_log_and_are_validated_as_kafka_does(tmp_path, fsyncs):
    assert validate_configs({"flush.messages": "1", "flush.ms": "0"}) is None
    assert validate_configs({"flush.messages": str(2 ** 63 - 1)}) is None
    assert "flush.messages" in validate_configs({"flush.messages": "0"})
    assert "flush.ms" in validate_configs({"flush.ms": "-1"})
    assert validate_configs({"flush.ms": "soon"}) is not None
    clock = MockTime()
    cfg = LogConfig().apply_topic_configs({"flush.messages": "3", "flush.ms": "500"})
    p = Partition("t", 0, str(tmp_path), broker_id=1, config=cfg, time=clock)
    p.make_leader(0, [1], [1], 0)
    assert (p.log.flush_messages, p.log.flush_ms) == (3, 500)
    p.append_records_to_leader(rb.build_batch([(None, b"a", 0), (None, b"b", 0)]), acks=1)
    assert _segment_syncs(fsyncs) == []
    p.append_records_to_leader(rb.build_batch([(None, b"c", 0)]), acks=1)
    assert len(_segment_syncs(fsyncs)) == 1 and p.log.recovery_point == 3
    p.append_records_to_leader(rb.build_batch([(None, b"d", 0)]), acks=1)
    clock.sleep(0.5)
    p.flush_if_due()                      # what the log flusher calls
    assert len(_segment_syncs(fsyncs)) == 2 and p.log.recovery_point == 4
    p.checkpoint_recovery_point()
    assert read_offset_checkpoint(os.path.join(p.dir, RECOVERY_POINT_CHECKPOINT)) == 4
    p.close()


def test_the_recovery_point_checkpoint_follows_flushes_and_comes_down_with_a_truncation(tmp_path, fsyncs):
    path = os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)
    log = UnifiedLog(str(tmp_path))
    for _ in range(5):
        _append(log)
    log.checkpoint_recovery_point()
    assert not os.path.exists(path), "nothing flushed, nothing to vouch for"
    log.flush()
    assert read_offset_checkpoint(path) == 0, "checkpointed only when asked (the periodic task)"
    log.checkpoint_recovery_point()
    assert read_offset_checkpoint(path) == 10
    log.truncate_to(4)
    assert log.recovery_point == 4 and read_offset_checkpoint(path) == 4, "lowered and written at once"
    log.close()


def test_checkpoints_are_written_as_kafkas_checkpoint_file(tmp_path, fsyncs):
    """temp file, fsync, atomic rename, fsync of the directory: the high watermark, the leader
    epochs and the recovery point alike."""
    d = str(tmp_path)
    hw = os.path.join(d, "high-watermark-checkpoint")
    write_hw_checkpoint(hw, 7)
    assert fsyncs == [hw + ".tmp", d] and not os.path.exists(hw + ".tmp")
    fsyncs.clear()
    LeaderEpochFileCache(d).assign(3, 0)
    assert fsyncs == [os.path.join(d, "leader-epoch-checkpoint.tmp"), d]
    fsyncs.clear()
    log = UnifiedLog(d, flush_messages=1)
    _append(log)
    fsyncs.clear()
    log.checkpoint_recovery_point()
    assert fsyncs == [os.path.join(d, RECOVERY_POINT_CHECKPOINT + ".tmp"), d]
    log.close()


def test_the_broker_flushes_by_a_topics_flush_ms_and_checkpoints_the_recovery_point_on_its_intervals(tmp_path,
                                                                                                     fsyncs):
    """Through the ReplicaManager: a topic's flush.ms reaches its partition (ReplicaManager._config_for),
    the maintenance loop runs the log flusher every log.flush.scheduler.interval.ms and writes the
    recovery point every log.flush.offset.checkpoint.interval.ms, all on the broker's clock."""
    from eoslab.v1 import broker_pb2
    from services.broker.metadata_cache import MetadataCache
    from services.broker.replica_manager import ReplicaManager
    from tests.unit.test_broker_clock_support import WatchedClock, until

    clock, md = WatchedClock(), MetadataCache()
    md.configs = {"t": {"flush.ms": "1000"}}
    defaults = LogConfig(flush_scheduler_interval_ms=500, recovery_point_checkpoint_interval_ms=3000)
    rm = ReplicaManager(1, str(tmp_path), defaults, md, time=clock)
    try:
        req = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
        req.partition_states.add(topic="t", partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1],
                                 zk_version=0)
        rm.become_leader_or_follower(req)
        p = rm.get_partition("t", 0)
        assert (p.log.flush_ms, p.log.flush_messages) == (1000, FLUSH_NEVER)
        p.append_records_to_leader(rb.build_batch([(None, b"a", 0)]), acks=1)
        checkpoint = os.path.join(p.dir, RECOVERY_POINT_CHECKPOINT)
        clock.step("isr-maintenance", 0.9)       # the flusher runs (0.5 s passed), flush.ms has not passed
        assert _segment_syncs(fsyncs) == [] and p.log.recovery_point == 0
        clock.step("isr-maintenance", 0.6)       # the flusher's next run, 1.5 s after the append
        until(lambda: p.log.recovery_point == 1, "the log flusher")
        assert len(_segment_syncs(fsyncs)) == 1 and not os.path.exists(checkpoint)
        clock.step("isr-maintenance", 2.0)       # 3.5 s: the recovery point checkpoint's interval passed
        until(lambda: read_offset_checkpoint(checkpoint) == 1, "the recovery point checkpoint")
    finally:
        rm.shutdown()


def test_the_brokers_flush_settings_become_every_partitions_defaults():
    """Kafka's broker-wide log.flush.interval.messages / .ms, the flusher's interval and the recovery-point
    checkpoint interval, as flags of the broker process; Kafka's defaults when unset."""
    from eoslab import kafka_version
    from services.broker.__main__ import log_config
    from services.broker.config import BrokerConfig
    base = ["--broker-id", "1", "--listen", "127.0.0.1:1", "--zookeeper", "127.0.0.1:2", "--data-dir", "/tmp/d"]
    a = BrokerConfig.parse(base)
    cfg = log_config(a, kafka_version.get(a.kafka_version))
    assert (cfg.flush_messages, cfg.flush_ms, cfg.flush_scheduler_interval_ms,
            cfg.recovery_point_checkpoint_interval_ms) == (FLUSH_NEVER, FLUSH_NEVER, FLUSH_NEVER, 60000)
    a = BrokerConfig.parse(base + ["--flush-messages", "1", "--flush-ms", "250", "--flush-scheduler-interval-ms",
                                   "50", "--flush-offset-checkpoint-interval-ms", "1000"])
    cfg = log_config(a, kafka_version.get(a.kafka_version))
    assert (cfg.flush_messages, cfg.flush_ms, cfg.flush_scheduler_interval_ms,
            cfg.recovery_point_checkpoint_interval_ms) == (1, 250, 50, 1000)
    with pytest.raises(Exception, match="flush.messages|flush-messages"):
        BrokerConfig.parse(base + ["--flush-messages", "0"])
