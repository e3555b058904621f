"""DescribeAcls, CreateAcls and DeleteAcls (Kafka's AclApis), and the authorized operations that Metadata,
DescribeCluster and the group descriptions report (Kafka's AuthHelper).

Guarantees, as Kafka's broker:
- without an authorizer (`authorizer.class.name` unset, Kafka's default) every operation is allowed;
  DescribeAcls is answered SECURITY_DISABLED ("No Authorizer is configured on the broker") with no
  resources, CreateAcls each creation SECURITY_DISABLED ("No Authorizer is configured."), DeleteAcls
  each filter SECURITY_DISABLED with no matching ACLs; nothing is stored;
- with one (services.broker.authorizer), DescribeAcls needs DESCRIBE on the cluster and CreateAcls and
  DeleteAcls need ALTER on it (CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise);
  DescribeAcls answers the cached bindings its filter matches, grouped by resource pattern, and a
  filter with an unknown (0 or out-of-range) code INVALID_REQUEST; CreateAcls answers each creation
  in the request's order, INVALID_REQUEST with Kafka's message for one Kafka refuses to store
  (eoslab.common.acl.validate) and stores the rest; DeleteAcls answers each filter with the bindings
  it removed, each with no error;
- the principal is the request's (listener.client_principal: User:ANONYMOUS on the PLAINTEXT
  listener) and the host its connection's peer address.
The request versions are Kafka 4.0's (v1-3; v0 was removed by KIP-896); an older --kafka-version
serves that release's own (eoslab.kafka_version).

`authorized_operations(resource_type, requested, release, authorizer, name)` is AuthHelper.authorizedOperations:
the operations the resource type supports (AclEntry.supportedOperations; a group's DESCRIBE_CONFIGS
and ALTER_CONFIGS from 4.0 on) that the authorizer allows the request's principal on the named
resource (all of them without an authorizer), as a bit field of AclOperation codes; `NOT_REQUESTED`
is Kafka's value when a request did not ask for them.
"""
from __future__ import annotations

from eoslab import kafka_version
from eoslab.common import acl as a
from eoslab.common.errors import E
from services.kafka_protocol.auth_helper import AuthHelper

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NOT_REQUESTED = -2147483648
# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12; Kafka's AclEntry.supportedOperations
SUPPORTED_OPERATIONS = {"topic": (3, 4, 5, 8, 6, 7, 10, 11), "group": (3, 8, 6, 10, 11),
                        "cluster": (5, 9, 10, 11, 12, 7, 8), "transactional_id": (8, 4)}
VERSIONS = {DESCRIBE_ACLS: (0, 3), CREATE_ACLS: (0, 3), DELETE_ACLS: (0, 3)}   # v0: before 4.0 only
NO_AUTHORIZER = "No Authorizer is configured."
RESOURCE_TYPES = {"topic": a.TOPIC, "group": a.GROUP, "cluster": a.CLUSTER, "transactional_id": a.TRANSACTIONAL_ID}


def authorized_operations(resource_type: str, requested: bool = True, release: str | None = None,
                          authorizer=None, name: str = a.CLUSTER_NAME) -> int:
    """`release`: the --kafka-version (a group's DESCRIBE_CONFIGS and ALTER_CONFIGS came with 4.0)."""
    if not requested:
        return NOT_REQUESTED
    ops = SUPPORTED_OPERATIONS[resource_type]
    if resource_type == "group" and not kafka_version.get(release).group_config_operations:
        ops = tuple(op for op in ops if op not in (10, 11))
    code = RESOURCE_TYPES[resource_type]
    auth = AuthHelper(authorizer)
    return sum(1 << op for op in ops if auth.authorize(op, code, name))


def _known(flt) -> bool:
    return (a.ANY_RESOURCE <= flt.resource_type_filter <= a.USER and a.ANY_PATTERN <= flt.pattern_type_filter
            <= a.PREFIXED and a.ANY_OP <= flt.operation <= a.DESCRIBE_TOKENS
            and a.ANY_PERMISSION <= flt.permission_type <= a.ALLOW)


def _filter(flt) -> a.AclBindingFilter:
    return a.AclBindingFilter(int(flt.resource_type_filter), flt.resource_name_filter, int(flt.pattern_type_filter),
                              flt.principal_filter, flt.host_filter, int(flt.operation), int(flt.permission_type))


class AclApis:
    def __init__(self, broker_apis):
        self.apis = broker_apis

    @property
    def authorizer(self):
        return getattr(self.apis, "authorizer", None)

    def _cluster(self, operation: int) -> bool:
        auth = getattr(self.apis, "auth", None) or AuthHelper(self.authorizer)
        return auth.authorize_cluster(operation)

    def describe_acls(self, header, req) -> dict:
        auth = self.authorizer
        if not self._cluster(a.DESCRIBE):
            return {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "resources": []}
        if auth is None:
            return {"error_code": E.SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker",
                    "resources": []}
        if not _known(req):
            return {"error_code": E.INVALID_REQUEST, "error_message": "DescribeAclsRequest contains UNKNOWN elements",
                    "resources": []}
        grouped: dict[tuple, list[dict]] = {}
        for b in auth.describe(_filter(req)):
            grouped.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
                {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission})
        return {"error_code": E.NONE, "error_message": None, "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in grouped.items()]}

    def create_acls(self, header, req) -> dict:
        auth = self.authorizer
        if not self._cluster(a.ALTER):
            return {"results": [{"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                                for _ in req.creations]}
        if auth is None:
            return {"results": [{"error_code": E.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
                                for _ in req.creations]}
        bindings = [a.AclBinding(int(c.resource_type), c.resource_name, int(c.resource_pattern_type), c.principal,
                                 c.host, int(c.operation), int(c.permission_type)) for c in req.creations]
        return {"results": [{"error_code": E.NONE if why is None else E.INVALID_REQUEST, "error_message": why}
                            for why in auth.create(bindings)]}

    def delete_acls(self, header, req) -> dict:
        auth = self.authorizer
        if not self._cluster(a.ALTER):
            return {"filter_results": [{"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                                        "matching_acls": []} for _ in req.filters]}
        if auth is None:
            return {"filter_results": [{"error_code": E.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
                                        "matching_acls": []} for _ in req.filters]}
        known = [f for f in req.filters if _known(f)]
        removed = iter(auth.delete([_filter(f) for f in known]))
        out = []
        for f in req.filters:
            if not _known(f):
                out.append({"error_code": E.INVALID_REQUEST, "error_message": "the filter has UNKNOWN elements",
                            "matching_acls": []})
                continue
            out.append({"error_code": E.NONE, "error_message": None, "matching_acls": [
                {"error_code": E.NONE, "error_message": None, "resource_type": b.resource_type,
                 "resource_name": b.name, "pattern_type": b.pattern_type, "principal": b.principal,
                 "host": b.host, "operation": b.operation, "permission_type": b.permission}
                for b in next(removed)]})
        return {"filter_results": out}


def register_acl_apis(apis) -> None:
    h = AclApis(apis)
    for key, fn in ((DESCRIBE_ACLS, h.describe_acls), (CREATE_ACLS, h.create_acls), (DELETE_ACLS, h.delete_acls)):
        apis.register(key, *VERSIONS[key], fn)
