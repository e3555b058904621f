"""A partition made before its topic's configs reached the broker's metadata (a LeaderAndIsr taken before
any UpdateMetadata) takes them when they arrive: the metadata cache names a topic whose configs are new
to it as changed, and the ReplicaManager applies them to its partitions at once. Real MetadataCache and
ReplicaManager in-process, on a mock clock."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common.time import MockTime
from eoslab.v1 import broker_pb2, common_pb2
from services.broker.log_config import LogConfig
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager

pytestmark = pytest.mark.fast
E = common_pb2.ErrorCode


def update_metadata(configs: dict) -> broker_pb2.UpdateMetadataRequest:
    um = broker_pb2.UpdateMetadataRequest(controller_epoch=1)
    for topic, c in configs.items():
        um.topic_configs.add(topic=topic, configs=c)
    return um


def test_a_topic_s_configs_new_to_the_cache_are_named_changed_and_equal_ones_are_not():
    meta = MetadataCache()
    assert meta.update(update_metadata({"t": {"min.insync.replicas": "2"}, "u": {}})) == {"t", "u"}
    assert meta.update(update_metadata({"t": {"min.insync.replicas": "2"}, "u": {}})) == set()
    assert meta.update(update_metadata({"t": {"min.insync.replicas": "3"}, "u": {}})) == {"t"}


def test_a_partition_made_before_its_topic_s_configs_takes_them_when_they_arrive(tmp_path):
    meta = MetadataCache()
    rm = ReplicaManager(1, str(tmp_path), LogConfig(), meta, time=MockTime())
    try:
        lai = broker_pb2.LeaderAndIsrRequest(controller_epoch=1)
        lai.partition_states.add(topic="t", partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2, 3],
                                 zk_version=0)
        assert rm.become_leader_or_follower(lai).error == E.NONE
        produce = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10)
        produce.partitions.add(topic="t", partition=0, batch=rb.build_batch([(None, b"v", 1)]))
        changed = meta.update(update_metadata({"t": {"min.insync.replicas": "2"}}))
        rm.update_topic_configs(changed)             # what the broker's UpdateMetadata handler does
        assert rm.get_partition("t", 0).config.min_insync_replicas == 2
        assert rm.append_records(produce).partitions[0].error == E.NOT_ENOUGH_REPLICAS
    finally:
        rm.shutdown()
