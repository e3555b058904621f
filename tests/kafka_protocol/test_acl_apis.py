"""services.kafka_protocol.acl_apis: the ACL requests and the authorized operations of a broker without an
authorizer (in process; the answers through real clients are in test_real_clients_group_admin.py)."""
from types import SimpleNamespace as NS

import pytest

from eoslab.common.errors import E
from services.kafka_protocol import acl_apis
from services.kafka_protocol.acl_apis import NOT_REQUESTED, authorized_operations

pytestmark = pytest.mark.fast


def test_a_groups_authorized_operations_gain_the_config_operations_on_4_0_only():
    read_describe_delete = (1 << 3) | (1 << 8) | (1 << 6)
    assert authorized_operations("group", True, "3.6") == read_describe_delete
    assert authorized_operations("group", True, "4.0") == read_describe_delete | (1 << 10) | (1 << 11)
    assert authorized_operations("group", False, "4.0") == NOT_REQUESTED


def test_every_creation_and_every_filter_gets_its_own_security_disabled_answer():
    h = acl_apis.AclApis(NS())                     # a broker with no authorizer
    created = h.create_acls(None, NS(creations=[object(), object(), object()]))
    assert [r["error_code"] for r in created["results"]] == [E.SECURITY_DISABLED] * 3
    deleted = h.delete_acls(None, NS(filters=[object(), object()]))
    assert [(r["error_code"], r["matching_acls"]) for r in deleted["filter_results"]] == [(E.SECURITY_DISABLED, [])] * 2
    described = h.describe_acls(None, NS())
    assert (described["error_code"], described["resources"]) == (E.SECURITY_DISABLED, [])
