"""Kafka's topic-config rules (eoslab.common.topic_configs) and the controller's config operations
(services/controller/topic_config_change.apply_ops), without a cluster."""
import pytest

from eoslab.common import record_batch as rb
from eoslab.common import topic_configs as tc
from eoslab.common.errors import E
from eoslab.v1 import controller_pb2
from services.controller.topic_config_change import ConfigRefused, apply_ops

pytestmark = pytest.mark.fast
Op = controller_pb2.ConfigOp


@pytest.mark.parametrize("name,value,ok", [
    ("cleanup.policy", "compact", True), ("cleanup.policy", "compact,delete", True),
    ("cleanup.policy", "shred", False), ("retention.ms", "-1", True), ("retention.ms", "-2", False),
    ("retention.bytes", "-5", True), ("min.cleanable.dirty.ratio", "0.9", True),
    ("min.cleanable.dirty.ratio", "1.5", False), ("message.timestamp.type", "LogAppendTime", True),
    ("message.timestamp.type", "WallTime", False), ("compression.type", "zstd", True),
    ("compression.type", "brotli", False), ("compression.gzip.level", "-1", True),
    ("compression.gzip.level", "0", False), ("compression.zstd.level", "-5", True),
    ("segment.bytes", "13", False), ("segment.bytes", "14", True), ("max.message.bytes", "0", True),
    ("max.message.bytes", "2147483648", False), ("flush.messages", str(2 ** 63 - 1), True),
    ("flush.messages", "0", False), ("unclean.leader.election.enable", "TRUE", True),
    ("unclean.leader.election.enable", "maybe", False), ("segment.ms", "0", False),
    ("no.such.config", "1", False)])
def test_values_are_checked_as_kafkas_logconfig_does(name, value, ok):
    why = tc.check(name, value)
    assert (why is None) == ok, why
    if not ok:
        assert name in why and "\n" not in why


def test_every_topic_config_has_a_valid_default():
    for name, key in tc.TOPIC_CONFIGS.items():
        assert tc.check(name, key.default) is None, name
    assert tc.ENFORCED <= set(tc.TOPIC_CONFIGS)


def _change(*ops, replace=False):
    return controller_pb2.TopicConfigChange(topic="t", replace=replace, ops=[
        Op(name=n, op=o, value=v or "", has_value=v is not None) for n, o, v in ops])


def test_incremental_operations_apply_in_order():
    cur = {"retention.ms": "1000", "cleanup.policy": "delete"}
    new = apply_ops(cur, _change(("retention.ms", Op.DELETE, None), ("segment.ms", Op.SET, "5000"),
                                 ("cleanup.policy", Op.APPEND, "compact"), ("cleanup.policy", Op.APPEND, "delete")))
    assert new == {"segment.ms": "5000", "cleanup.policy": "delete,compact"}
    assert cur == {"retention.ms": "1000", "cleanup.policy": "delete"}       # the current set is untouched
    assert apply_ops(new, _change(("cleanup.policy", Op.SUBTRACT, "delete")))["cleanup.policy"] == "compact"
    # APPEND to a list config left at its default starts from the default
    assert apply_ops({}, _change(("cleanup.policy", Op.APPEND, "compact")))["cleanup.policy"] == "delete,compact"


def test_alter_configs_replaces_the_whole_set():
    assert apply_ops({"retention.ms": "1000"}, _change(("segment.ms", Op.SET, "5000"), replace=True)) == \
        {"segment.ms": "5000"}


@pytest.mark.parametrize("ops,code", [
    ([("retention.ms", Op.APPEND, "5")], E.INVALID_CONFIG),          # append to a non-list config
    ([("retention.ms", Op.SUBTRACT, "5")], E.INVALID_CONFIG),
    ([("no.such", Op.SET, "1")], E.INVALID_CONFIG),
    ([("retention.ms", Op.SET, "soon")], E.INVALID_CONFIG),
    ([("retention.ms", Op.SET, None)], E.INVALID_REQUEST),           # a null value to set
    ([("cleanup.policy", Op.APPEND, "shred")], E.INVALID_CONFIG)])
def test_refused_changes_name_the_config(ops, code):
    with pytest.raises(ConfigRefused) as e:
        apply_ops({}, _change(*ops))
    assert e.value.code == code and ops[0][0] in str(e.value)


def _batch(keys):
    return rb.build_batch([(k, b"v", 0) for k in keys])


def test_a_compacted_topic_refuses_a_record_without_a_key():
    assert rb.validate_batch(_batch([b"k", b"k2"]), 1 << 20, compacted=True) is None
    bad = rb.validate_batch(_batch([b"k", None, b"k3", None]), 1 << 20, compacted=True)
    assert bad is not None and bad.code == E.INVALID_RECORD
    assert [i for i, _ in bad.record_errors] == [1, 3]          # Kafka's RecordErrors: which records, by index
    assert rb.validate_batch(_batch([None]), 1 << 20, compacted=False) is None
    assert tc.is_compacted({"cleanup.policy": "delete,compact"}) and not tc.is_compacted({})
