"""config_ops.apply_ops: Kafka's incremental operations on an entity's configs (ConfigAdminManager)."""
import pytest

from eoslab.common import config_ops as c
from eoslab.common.errors import E

LISTS = {"cleanup.policy": "delete", "metric.reporters": ""}


def apply(current, ops, replace=False):
    return c.apply_ops(current, ops, replace, LISTS.get)


def test_operations_apply_in_order_to_a_copy():
    current = {"retention.ms": "5", "cleanup.policy": "compact"}
    new = apply(current, [("retention.ms", c.DELETE, None), ("segment.ms", c.SET, "9"),
                          ("cleanup.policy", c.APPEND, "delete, compact"), ("segment.ms", c.SET, "10")])
    assert new == {"segment.ms": "10", "cleanup.policy": "compact,delete"}
    assert current == {"retention.ms": "5", "cleanup.policy": "compact"}
    assert apply(current, [("segment.ms", c.SET, "1")], replace=True) == {"segment.ms": "1"}


def test_a_list_not_set_starts_from_its_default_and_subtract_removes():
    assert apply({}, [("cleanup.policy", c.APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert apply({}, [("cleanup.policy", c.SUBTRACT, "delete")]) == {"cleanup.policy": ""}
    # as Kafka: only values already in the list are left out of an append
    assert apply({"metric.reporters": "b"}, [("metric.reporters", c.APPEND, "a,b")]) == {"metric.reporters": "b,a"}


@pytest.mark.parametrize("ops, code, message", [
    ([("retention.ms", c.SET, None)], E.INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ([("retention.ms", c.APPEND, "5")], E.INVALID_CONFIG,
     "Config value append is not allowed for config key: retention.ms"),
    ([("retention.ms", c.SUBTRACT, "5")], E.INVALID_CONFIG,
     "Config value subtract is not allowed for config key: retention.ms"),
    ([("retention.ms", 7, "5")], E.INVALID_REQUEST, "unknown config operation 7 for retention.ms"),
])
def test_refusals_are_kafkas(ops, code, message):
    with pytest.raises(c.ConfigOpRefused) as refused:
        apply({"retention.ms": "1"}, ops)
    assert (refused.value.code, str(refused.value)) == (code, message)
    assert apply({"retention.ms": "1"}, [("retention.ms", c.DELETE, None)]) == {}
