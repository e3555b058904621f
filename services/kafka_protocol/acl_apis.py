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

`authorized_operations(resource_type)` is what Kafka's AuthHelper.authorizedOperations reports with no
authorizer: every operation the resource type supports (AclEntry.supportedOperations; a group's
DESCRIBE_CONFIGS and ALTER_CONFIGS from 4.0 on), as a bit field of AclOperation codes; `NOT_REQUESTED` is Kafka's value when a request did not ask for them.
"""
from __future__ import annotations

from eoslab import kafka_version
from eoslab.common.errors import E

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NOT_REQUESTED = -2147483648
# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12; Kafka's AclEntry.supportedOperations
SUPPORTED_OPERATIONS = {"topic": (3, 4, 5, 8, 6, 7, 10, 11), "group": (3, 8, 6, 10, 11),
                        "cluster": (5, 9, 10, 11, 12, 7, 8), "transactional_id": (8, 4)}
VERSIONS = {DESCRIBE_ACLS: (1, 3), CREATE_ACLS: (1, 3), DELETE_ACLS: (1, 3)}
NO_AUTHORIZER = "No Authorizer is configured."


def authorized_operations(resource_type: str, requested: bool = True, release: str | None = None) -> int:
    """`release`: the --kafka-version (a group's DESCRIBE_CONFIGS and ALTER_CONFIGS came with 4.0)."""
    if not requested:
        return NOT_REQUESTED
    ops = SUPPORTED_OPERATIONS[resource_type]
    if resource_type == "group" and not kafka_version.get(release).group_config_operations:
        ops = tuple(op for op in ops if op not in (10, 11))
    return sum(1 << op for op in ops)


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
