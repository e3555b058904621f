"""AclAuthorizer: a broker's authorizer (`authorizer.class.name`), its ACLs in ZooKeeper (AclStore) and
cached, Kafka's decision on every check (eoslab.common.acl.authorize).

Guarantees:
- the cache holds every stored binding, by resource node; it is loaded at start, a resource's
  bindings are read again when a change notification names its node (a child of `/kafka-acl-changes`
  or `/kafka-acl-extended-changes`, as Kafka's brokers watch them, taken in order on one listener
  thread each: services.common.change_notifications), and everything is read again at once after this
  broker's own create or delete, so an ACL this broker stored applies to its next request;
- `authorize` is allowed for `super.users` (Kafka's format "User:a;User:b"), decided from the ACLs
  otherwise, and with no ACL on the resource allowed only under `allow.everyone.if.no.acl.found`;
- a reload that fails (ZooKeeper out of reach) keeps the last cache; a notification's is retried by its
  listener; the decision never waits on ZooKeeper.
"""
from __future__ import annotations

import logging
import threading

from kazoo.exceptions import KazooException, ZookeeperError

from eoslab.common import acl as a
from services.broker.acl_store import LITERAL_CHANGES, PREFIXED_CHANGES, AclStore, acl_path
from services.common import zk_paths
from services.common.change_notifications import ChangeNotificationListener

log = logging.getLogger(__name__)
ZK_ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZERS = ("", ZK_ACL_AUTHORIZER, STANDARD_AUTHORIZER)


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's super.users: principals separated by ';' (KafkaPrincipal "Type:name")."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, zk, super_users: frozenset[str] = frozenset(), allow_if_no_acls: bool = False):
        self.store = AclStore(zk)
        self.zk = zk
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls
        self._acls: tuple[a.AclBinding, ...] = ()
        self._reload_lock = threading.Lock()
        self._listeners = [ChangeNotificationListener(zk, path, self._on_notification, name=f"acl-changes{n}")
                           for n, path in enumerate((LITERAL_CHANGES, PREFIXED_CHANGES))]

    def start(self) -> None:
        for listener in self._listeners:     # before the load, so no change falls between the two
            listener.start()
        zk_paths.retrying(self.zk)(self._load)   # as Kafka's loadCache: through a connection loss, not past it

    def _load(self) -> None:
        with self._reload_lock:
            self._acls = tuple(self.store.bindings())

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()

    def _on_notification(self, data: bytes) -> None:
        """One resource node changed (the notification's data is its path): its bindings, read again."""
        path = data.decode()
        with self._reload_lock:
            fresh = self.store.bindings_at(path)
            self._acls = tuple(b for b in self._acls if acl_path(b) != path) + tuple(fresh)

    def reload(self) -> bool:
        try:
            self._load()
        except (KazooException, ZookeeperError) as e:
            log.warning("ACLs not reloaded from ZooKeeper (%s): keeping the %d cached", e, len(self._acls))
            return False
        return True

    @property
    def acls(self) -> tuple[a.AclBinding, ...]:
        return self._acls

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        return a.authorize(self._acls, principal, host, operation, resource_type, name, self.super_users,
                           self.allow_if_no_acls)

    def create(self, bindings: list[a.AclBinding]) -> list[str | None]:
        try:
            return self.store.create(bindings)
        finally:
            self.reload()

    def delete(self, filters: list[a.AclBindingFilter]) -> list[list[a.AclBinding]]:
        try:
            return self.store.delete(filters)
        finally:
            self.reload()

    def describe(self, flt: a.AclBindingFilter) -> list[a.AclBinding]:
        return [b for b in self._acls if flt.matches(b)]
