"""Kafka's ACL model: bindings, binding filters and the authorizer's decision (shared by clients and services,
as Kafka's clients jar holds `common.acl` and `common.resource`).

Guarantees, each Kafka's rule:
- codes are Kafka's (ResourceType, PatternType, AclOperation, AclPermissionType);
- `AclBindingFilter.matches(binding)`: ResourcePatternFilter.matches (ANY type; pattern ANY or the
  same pattern type match the name exactly, MATCH matches a LITERAL of the same name or the wildcard
  "*" and a PREFIXED whose name starts the filter's name; a null name matches any) and
  AccessControlEntryFilter.matches (null principal and host, ANY operation and permission match any);
- `validate(binding)` is what Kafka refuses to store (INVALID_REQUEST): a non-concrete resource,
  pattern, operation or permission type, an empty resource name, a CLUSTER resource not named
  "kafka-cluster", a principal that is not "Type:name";
- `authorize(acls, principal, host, operation, resource_type, name, super_users, allow_if_no_acls)`
  is StandardAuthorizerData's decision: a super user is allowed; the ACLs that apply are the
  resource's LITERAL ones of the same name, its PREFIXED ones whose name starts the resource's name,
  and the type's LITERAL "*"; with none, `allow_if_no_acls` (allow.everyone.if.no.acl.found); a
  DENY that matches (principal or "User:*", host or "*", the operation or ALL) wins; an ALLOW for
  the operation or ALL, or one that implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE;
  ALTER_CONFIGS implies DESCRIBE_CONFIGS; a DENY implies nothing), allows; otherwise denied;
- `authorize_by_resource_type(...)` is Kafka's Authorizer.authorizeByResourceType (may the principal
  do the operation on some resource of the type?): yes if `authorize` allows it on a resource no ACL
  names ("hardcode"); else, among the ACLs for the principal or User:*, a matching host and the
  operation or ALL: a DENY on the type's LITERAL "*" says no, an ALLOW on it yes, and otherwise any
  ALLOW says yes whose name no LITERAL DENY of the same name (for a LITERAL ALLOW) and no PREFIXED
  DENY on a prefix of its name (the name itself included) covers.
"""
from __future__ import annotations

from dataclasses import dataclass

# ResourceType
ANY_RESOURCE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
# PatternType
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
# AclOperation
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, \
    IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = range(1, 15)
# AclPermissionType
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True)
class AclBindingFilter:
    resource_type: int = ANY_RESOURCE
    name: str | None = None
    pattern_type: int = ANY_PATTERN
    principal: str | None = None
    host: str | None = None
    operation: int = ANY_OP
    permission: int = ANY_PERMISSION

    def matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type != ANY_RESOURCE and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (ANY_PATTERN, MATCH) and self.pattern_type != b.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (ANY_PATTERN, b.pattern_type):
            return self.name == b.name
        if b.pattern_type == LITERAL:                      # MATCH
            return self.name == b.name or b.name == WILDCARD
        return b.pattern_type == PREFIXED and self.name.startswith(b.name)

    def matches_entry(self, b: AclBinding) -> bool:
        return ((self.principal is None or self.principal == b.principal) and
                (self.host is None or self.host == b.host) and
                self.operation in (ANY_OP, b.operation) and self.permission in (ANY_PERMISSION, b.permission))

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b) and self.matches_entry(b)


def validate(b: AclBinding) -> str | None:
    """Why Kafka would refuse to store the binding (INVALID_REQUEST), or None."""
    if b.resource_type not in (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER):
        return f"invalid resource type {b.resource_type}"
    if b.pattern_type not in (LITERAL, PREFIXED):
        return f"invalid pattern type {b.pattern_type}"
    if not ALL <= b.operation <= DESCRIBE_TOKENS:
        return f"invalid operation {b.operation}"
    if b.permission not in (DENY, ALLOW):
        return f"invalid permission type {b.permission}"
    if not b.name:
        return "Invalid empty resource name"
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, who = (b.principal or "").partition(":")
    if not sep or not kind or not who:
        return f"invalid principal {b.principal!r}"
    return None


def applies(b: AclBinding, resource_type: int, name: str) -> bool:
    """Does the binding's pattern cover the resource?"""
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == LITERAL:
        return b.name == name or b.name == WILDCARD
    return b.pattern_type == PREFIXED and name.startswith(b.name)


def _result(b: AclBinding, principal: str, host: str, operation: int) -> int | None:
    """StandardAuthorizerData.findResult: ALLOW, DENY, or None when the binding says nothing."""
    if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (WILDCARD, host):
        return None
    if b.operation != ALL:
        if b.permission == ALLOW:
            if operation == DESCRIBE:
                if b.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if b.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != b.operation:
                return None
        elif operation != b.operation:
            return None
    return b.permission


def authorize(acls, principal: str, host: str, operation: int, resource_type: int, name: str,
              super_users=frozenset(), allow_if_no_acls: bool = False) -> bool:
    if principal in super_users:
        return True
    relevant = [b for b in acls if applies(b, resource_type, name)]
    if not relevant:
        return allow_if_no_acls
    results = {_result(b, principal, host, operation) for b in relevant}
    return DENY not in results and ALLOW in results


def authorize_by_resource_type(acls, principal: str, host: str, operation: int, resource_type: int,
                               super_users=frozenset(), allow_if_no_acls: bool = False) -> bool:
    if authorize(acls, principal, host, operation, resource_type, "hardcode", super_users, allow_if_no_acls):
        return True                     # Kafka's probe: a resource no ACL names, or a super user
    mine = [b for b in acls if b.resource_type == resource_type and b.principal in (principal, WILDCARD_PRINCIPAL)
            and b.host in (WILDCARD, host) and b.operation in (operation, ALL)]
    denies = [b for b in mine if b.permission == DENY]
    if any(b.pattern_type == LITERAL and b.name == WILDCARD for b in denies):
        return False
    allows = [b for b in mine if b.permission == ALLOW]
    if any(b.pattern_type == LITERAL and b.name == WILDCARD for b in allows):
        return True
    denied_literal = {b.name for b in denies if b.pattern_type == LITERAL}
    denied_prefixes = {b.name for b in denies if b.pattern_type == PREFIXED}
    for b in allows:
        if b.pattern_type == LITERAL and b.name in denied_literal:
            continue
        if not any(b.name[:n] in denied_prefixes for n in range(1, len(b.name) + 1)):
            return True
    return False
