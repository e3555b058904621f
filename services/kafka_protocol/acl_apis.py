"""DescribeAcls, CreateAcls and DeleteAcls as a Kafka broker with no authorizer answers them (Kafka's
AclApis when `authorizer.class.name` is unset, its default).

Guarantees: the lab's brokers run no authorizer (no principal is authenticated: every client is
User:ANONYMOUS, and every operation is allowed), so, as Kafka's broker without one:
- DescribeAcls is answered SECURITY_DISABLED with the message "No Authorizer is configured on the
  broker" and no resources;
- CreateAcls answers each creation asked for SECURITY_DISABLED ("No Authorizer is configured."),
  one result per creation, in the request's order; nothing is stored;
- DeleteAcls answers each filter SECURITY_DISABLED with no matching ACLs.
The request versions are Kafka 4.0's (v1-3; v0 was removed by KIP-896); an older --kafka-version
serves that release's own (eoslab.kafka_version).
"""
from __future__ import annotations

from eoslab.common.errors import E

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSIONS = {DESCRIBE_ACLS: (1, 3), CREATE_ACLS: (1, 3), DELETE_ACLS: (1, 3)}
NO_AUTHORIZER = "No Authorizer is configured."


def describe_acls(header, req) -> dict:
    return {"error_code": E.SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker",
            "resources": []}


def create_acls(header, req) -> dict:
    return {"results": [{"error_code": E.SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
                        for _ in req.creations]}


def delete_acls(header, req) -> dict:
    return {"filter_results": [{"error_code": E.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
                                "matching_acls": []} for _ in req.filters]}


def register_acl_apis(apis) -> None:
    for key, fn in ((DESCRIBE_ACLS, describe_acls), (CREATE_ACLS, create_acls), (DELETE_ACLS, delete_acls)):
        apis.register(key, *VERSIONS[key], fn)
