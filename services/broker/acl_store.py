"""AclStore: ACL bindings in ZooKeeper as Kafka's ZooKeeper-mode AclAuthorizer keeps them.

Guarantees:
- layout (Kafka's ZkAclStore): a LITERAL binding's ACEs are in `/kafka-acl/<ResourceType>/<name>`, a
  PREFIXED one's in `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, each node's data
  `{"version": 1, "acls": [{"principal", "permissionType", "operation", "host"}]}` with Kafka's names
  ("Allow", "Read", "Topic", ...); every change is also written as a sequential child of
  `/kafka-acl-changes` (literal) or `/kafka-acl-extended-changes` (prefixed), which brokers watch;
- `create(bindings)` answers each binding (None or why it is invalid: eoslab.common.acl.validate); a
  binding already stored is answered without an error, and stored once;
- `delete(filters)` answers each filter with the bindings it removed; a resource left with no ACE
  has its node deleted;
- every read-modify-write of a node is conditional on the version read (ZooKeeper's setData/delete
  with a version), retried when another broker changed the node meanwhile, so concurrent creates and
  deletes on different brokers lose nothing;
- `bindings()` lists every stored binding, `bindings_at(path)` those of one resource node (the data of
  a change notification), both read from ZooKeeper, not cached.
"""
from __future__ import annotations

import json

from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError, NotEmptyError

from eoslab.common import acl as a

LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"
LITERAL_CHANGES, PREFIXED_CHANGES = "/kafka-acl-changes", "/kafka-acl-extended-changes"
RESOURCE_NAMES = {a.TOPIC: "Topic", a.GROUP: "Group", a.CLUSTER: "Cluster", a.TRANSACTIONAL_ID: "TransactionalId",
                  a.DELEGATION_TOKEN: "DelegationToken", a.USER: "User"}
OPERATION_NAMES = {a.ALL: "All", a.READ: "Read", a.WRITE: "Write", a.CREATE: "Create", a.DELETE: "Delete",
                   a.ALTER: "Alter", a.DESCRIBE: "Describe", a.CLUSTER_ACTION: "ClusterAction",
                   a.DESCRIBE_CONFIGS: "DescribeConfigs", a.ALTER_CONFIGS: "AlterConfigs",
                   a.IDEMPOTENT_WRITE: "IdempotentWrite", a.CREATE_TOKENS: "CreateTokens",
                   a.DESCRIBE_TOKENS: "DescribeTokens"}
PERMISSION_NAMES = {a.ALLOW: "Allow", a.DENY: "Deny"}
_BY_NAME = {"resource": {v: k for k, v in RESOURCE_NAMES.items()}, "op": {v: k for k, v in OPERATION_NAMES.items()},
            "perm": {v: k for k, v in PERMISSION_NAMES.items()}}


def _path(resource_type: int, name: str, pattern: int) -> str:
    root = LITERAL_ROOT if pattern == a.LITERAL else PREFIXED_ROOT
    return f"{root}/{RESOURCE_NAMES[resource_type]}/{name}"


def acl_path(b: a.AclBinding) -> str:
    """The node holding the binding's ACEs."""
    return _path(b.resource_type, b.name, b.pattern_type)


def _ace(b: a.AclBinding) -> dict:
    return {"principal": b.principal, "permissionType": PERMISSION_NAMES[b.permission],
            "operation": OPERATION_NAMES[b.operation], "host": b.host}


def _binding(resource_type: int, name: str, pattern: int, ace: dict) -> a.AclBinding:
    return a.AclBinding(resource_type, name, pattern, ace["principal"], ace["host"], _BY_NAME["op"][ace["operation"]],
                        _BY_NAME["perm"][ace["permissionType"]])


class AclStore:
    def __init__(self, zk):
        self.zk = zk

    def _read(self, path: str) -> tuple[list[dict], int | None]:
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return [], None
        return list(json.loads(data or b"{}").get("acls", [])), stat.version

    def _write(self, path: str, aces: list[dict], version: int | None) -> None:
        data = json.dumps({"version": 1, "acls": aces}, separators=(",", ":")).encode()
        if version is None:
            self.zk.create(path, data, makepath=True)
        elif aces:
            self.zk.set(path, data, version=version)
        else:
            self.zk.delete(path, version=version)

    def _change(self, path: str, update) -> bool:
        """Apply update(aces) -> new aces or None (nothing to do) to the node, conditionally; True if written."""
        while True:
            aces, version = self._read(path)
            new = update(aces)
            if new is None:
                return False
            try:
                self._write(path, new, version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue                                   # changed under us: read again
            changes = LITERAL_CHANGES if path.startswith(LITERAL_ROOT + "/") else PREFIXED_CHANGES
            self.zk.create(f"{changes}/acl_changes_", path.encode(), sequence=True, makepath=True)
            return True

    def create(self, bindings: list[a.AclBinding]) -> list[str | None]:
        out = []
        for b in bindings:
            why = a.validate(b)
            if why is None:
                ace = _ace(b)
                self._change(_path(b.resource_type, b.name, b.pattern_type),
                             lambda aces, ace=ace: None if ace in aces else aces + [ace])
            out.append(why)
        return out

    def bindings(self) -> list[a.AclBinding]:
        out = []
        for root, pattern in ((LITERAL_ROOT, a.LITERAL), (PREFIXED_ROOT, a.PREFIXED)):
            for kind in self._children(root):
                rtype = _BY_NAME["resource"].get(kind)
                if rtype is None:
                    continue
                for name in self._children(f"{root}/{kind}"):
                    aces, _ = self._read(f"{root}/{kind}/{name}")
                    out += [_binding(rtype, name, pattern, ace) for ace in aces]
        return out

    def bindings_at(self, path: str) -> list[a.AclBinding]:
        for root, pattern in ((LITERAL_ROOT, a.LITERAL), (PREFIXED_ROOT, a.PREFIXED)):
            kind, _, name = path.removeprefix(root + "/").partition("/") if path.startswith(root + "/") else ("", "", "")
            if (rtype := _BY_NAME["resource"].get(kind)) is not None and name:
                return [_binding(rtype, name, pattern, ace) for ace in self._read(path)[0]]
        return []

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def acls(self, flt: a.AclBindingFilter) -> list[a.AclBinding]:
        return [b for b in self.bindings() if flt.matches(b)]

    def delete(self, filters: list[a.AclBindingFilter]) -> list[list[a.AclBinding]]:
        out = []
        for flt in filters:
            removed: list[a.AclBinding] = []
            for path, (rtype, name, pattern) in {_path(b.resource_type, b.name, b.pattern_type):
                                                 (b.resource_type, b.name, b.pattern_type)
                                                 for b in self.acls(flt)}.items():
                gone: list[a.AclBinding] = []

                def update(aces, rtype=rtype, name=name, pattern=pattern, gone=gone):
                    gone.clear()
                    keep = []
                    for ace in aces:
                        b = _binding(rtype, name, pattern, ace)
                        (gone if flt.matches(b) else keep).append(b if flt.matches(b) else ace)
                    return keep if gone else None
                self._change(path, update)
                removed += gone
            out.append(removed)
        return out
