"""eoslab.common.acl: Kafka's binding-filter matching and StandardAuthorizerData's decision, rule by rule."""
import pytest

from eoslab.common import acl as a
from eoslab.common.acl import AclBinding, AclBindingFilter

pytestmark = pytest.mark.fast


def bind(name="orders", pattern=a.LITERAL, principal="User:alice", op=a.READ, perm=a.ALLOW, host="*",
         rtype=a.TOPIC):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def test_match_filters_take_literal_wildcard_and_prefixed_patterns_any_takes_the_exact_name():
    lit, star, pre, other = bind(), bind(name="*"), bind(name="ord", pattern=a.PREFIXED), bind(name="payments")
    match = AclBindingFilter(a.TOPIC, "orders", a.MATCH)
    assert [match.matches(b) for b in (lit, star, pre, other)] == [True, True, True, False]
    exact = AclBindingFilter(a.TOPIC, "orders", a.ANY_PATTERN)
    assert [exact.matches(b) for b in (lit, star, pre, other)] == [True, False, False, False]
    prefixed_only = AclBindingFilter(a.TOPIC, "ord", a.PREFIXED)
    assert [prefixed_only.matches(b) for b in (lit, star, pre)] == [False, False, True]
    assert AclBindingFilter().matches(bind(rtype=a.GROUP))                          # everything
    assert not AclBindingFilter(principal="User:bob").matches(bind())
    assert not AclBindingFilter(operation=a.WRITE).matches(bind())


def test_bindings_kafka_refuses_to_store():
    assert a.validate(bind()) is None
    assert a.validate(bind(pattern=a.MATCH)) and a.validate(bind(op=a.ANY_OP)) and a.validate(bind(perm=a.ANY_PERMISSION))
    assert a.validate(bind(name="")) == "Invalid empty resource name"
    assert "kafka-cluster" in a.validate(bind(name="c", rtype=a.CLUSTER))
    assert a.validate(bind(name="kafka-cluster", rtype=a.CLUSTER)) is None
    assert a.validate(bind(principal="alice"))


def test_no_acl_for_the_resource_falls_back_to_allow_everyone_if_no_acl_found():
    acls = [bind(name="payments")]
    assert a.authorize(acls, "User:ANONYMOUS", "1.2.3.4", a.WRITE, a.TOPIC, "orders", allow_if_no_acls=True)
    assert not a.authorize(acls, "User:ANONYMOUS", "1.2.3.4", a.WRITE, a.TOPIC, "orders")
    # an ACL on the resource for someone else: denied, whatever allow.everyone.if.no.acl.found says
    assert not a.authorize([bind()], "User:bob", "h", a.READ, a.TOPIC, "orders", allow_if_no_acls=True)
    assert a.authorize([bind()], "User:bob", "h", a.READ, a.TOPIC, "orders", super_users={"User:bob"})


def test_deny_wins_and_allow_implies_describe_but_deny_implies_nothing():
    acls = [bind(op=a.WRITE), bind(name="ord", pattern=a.PREFIXED, op=a.ALL, perm=a.DENY, principal="User:*",
                                    host="10.0.0.9")]
    assert a.authorize(acls, "User:alice", "10.0.0.1", a.WRITE, a.TOPIC, "orders")
    assert a.authorize(acls, "User:alice", "10.0.0.1", a.DESCRIBE, a.TOPIC, "orders")      # WRITE implies it
    assert not a.authorize(acls, "User:alice", "10.0.0.1", a.READ, a.TOPIC, "orders")
    assert not a.authorize(acls, "User:alice", "10.0.0.9", a.WRITE, a.TOPIC, "orders")     # the DENY's host
    deny_read = [bind(op=a.READ, perm=a.DENY), bind(op=a.DESCRIBE)]
    assert a.authorize(deny_read, "User:alice", "h", a.DESCRIBE, a.TOPIC, "orders")
    assert a.authorize([bind(op=a.ALTER_CONFIGS)], "User:alice", "h", a.DESCRIBE_CONFIGS, a.TOPIC, "orders")
    assert not a.authorize([bind(op=a.DESCRIBE_CONFIGS)], "User:alice", "h", a.ALTER_CONFIGS, a.TOPIC, "orders")


def test_authorize_by_resource_type_is_kafkas_some_resource_of_the_type_may_be_allowed():
    by_type = a.authorize_by_resource_type
    anon = "User:ANONYMOUS"
    assert by_type([], anon, "10.0.0.1", a.WRITE, a.TOPIC, allow_if_no_acls=True)
    assert not by_type([], anon, "10.0.0.1", a.WRITE, a.TOPIC)
    assert by_type([], anon, "10.0.0.1", a.WRITE, a.TOPIC, super_users={anon})
    allow_orders = bind(principal=anon, op=a.WRITE)
    assert by_type([allow_orders], anon, "10.0.0.1", a.WRITE, a.TOPIC)
    assert not by_type([allow_orders], "User:bob", "10.0.0.1", a.WRITE, a.TOPIC)
    assert not by_type([allow_orders], anon, "10.0.0.1", a.READ, a.TOPIC)           # another operation
    assert not by_type([allow_orders, bind(name="or", pattern=a.PREFIXED, principal=anon, op=a.WRITE, perm=a.DENY)],
                       anon, "10.0.0.1", a.WRITE, a.TOPIC)                           # a prefix of it denied
    assert not by_type([allow_orders, bind(principal=anon, op=a.ALL, perm=a.DENY)], anon, "10.0.0.1", a.WRITE,
                       a.TOPIC)                                                      # the same name denied (ALL)
    assert by_type([allow_orders, bind(name="payments", principal=anon, op=a.WRITE, perm=a.DENY)], anon,
                   "10.0.0.1", a.WRITE, a.TOPIC)                                     # another name denied
    assert not by_type([bind(name="*", principal="User:*", op=a.WRITE, perm=a.DENY), allow_orders], anon,
                       "10.0.0.1", a.WRITE, a.TOPIC, allow_if_no_acls=True)          # the wildcard denied
    assert not by_type([bind(principal=anon, op=a.WRITE, host="10.9.9.9")], anon, "10.0.0.1", a.WRITE, a.TOPIC)
    assert by_type([bind(name="*", principal="User:*", op=a.WRITE)], anon, "10.0.0.1", a.WRITE, a.TOPIC)
