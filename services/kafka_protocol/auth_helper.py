"""AuthHelper: the authorization checks of a broker's Kafka requests (Kafka's AuthHelper), against the
request's principal and host (listener.client_principal / client_host).

Guarantees:
- with no authorizer every check passes, so a broker without `authorizer.class.name` answers exactly
  as before;
- `authorize(op, resource_type, name)` is the authorizer's decision for one resource;
  `authorized(op, resource_type, names)` the set of the names allowed (each name decided once);
- `authorize_by_resource_type(op, resource_type)` is Kafka's authorizeByResourceType
  (eoslab.common.acl): an idempotent producer's InitProducerId without IDEMPOTENT_WRITE on the
  cluster passes when WRITE on some topic may be allowed.
"""
from __future__ import annotations

from eoslab.common import acl as a
from services.kafka_protocol.listener import client_host, client_principal


class AuthHelper:
    def __init__(self, authorizer=None):
        self.authorizer = authorizer

    def authorize(self, operation: int, resource_type: int, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(client_principal(), client_host(), operation, resource_type, name or "")

    def authorized(self, operation: int, resource_type: int, names) -> set[str]:
        return {n for n in set(names) if self.authorize(operation, resource_type, n)}

    def authorize_cluster(self, operation: int) -> bool:
        return self.authorize(operation, a.CLUSTER, a.CLUSTER_NAME)

    def authorize_by_resource_type(self, operation: int, resource_type: int) -> bool:
        auth = self.authorizer
        if auth is None:
            return True
        return a.authorize_by_resource_type(auth.acls, client_principal(), client_host(), operation, resource_type,
                                            auth.super_users, auth.allow_if_no_acls)
