"""ScramCredentials: users' SCRAM credentials in ZooKeeper as Kafka's ZooKeeper-mode brokers keep them
(ZkAdminManager's DescribeUserScramCredentials and AlterUserScramCredentials).

Guarantees, each ZkAdminManager's rule:
- layout: the user's entity configs (services.common.entity_configs: `/config/users/<sanitized user>`,
  with a change notification) hold `"SCRAM-SHA-256": "salt=..,stored_key=..,server_key=..,iterations=N"`
  (base64 fields, ScramCredentialUtils' format), one entry per mechanism;
- an upsertion stores the salt, the iterations and the keys derived from the salted password the
  client sent (ScramFormatter: stored key H(HMAC(salted, "Client Key")), server key
  HMAC(salted, "Server Key")); the password itself is never seen;
- refused, per user: an empty name (UNACCEPTABLE_CREDENTIAL "Username must not be empty"), an unknown
  mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384 (UNACCEPTABLE_CREDENTIAL
  "Too few iterations" / "Too many iterations"), the same (user, mechanism) twice in one request
  (DUPLICATE_RESOURCE), a deletion of a credential that does not exist (RESOURCE_NOT_FOUND); a
  refused user's other alterations are not made;
- describe: named users each once (an empty name RESOURCE_NOT_FOUND, a name asked twice
  DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND "Attempt to describe a user
  credential that does not exist: <user>"); no names: every user with a credential, sorted;
- a user's node is changed conditionally on the version read, so concurrent alterations on two
  brokers lose nothing.
"""
from __future__ import annotations

import base64
import hashlib
import hmac

from eoslab.common.errors import E
from services.common import entity_configs

MECHANISMS = {1: ("SCRAM-SHA-256", hashlib.sha256), 2: ("SCRAM-SHA-512", hashlib.sha512)}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
NO_SUCH_USER = "Attempt to describe a user credential that does not exist"


def credential(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> str:
    _, h = MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    stored_key = h(client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", h).digest()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


def iterations_of(value: str) -> int:
    fields = dict(kv.split("=", 1) for kv in value.split(","))
    return int(fields["iterations"])


class ScramCredentials:
    def __init__(self, zk):
        self.zk = zk

    def _read(self, user: str) -> tuple[dict, int | None]:
        return entity_configs.read(self.zk, "users", user)

    def _scram(self, config: dict) -> list[dict]:
        return [{"mechanism": m, "iterations": iterations_of(config[name])}
                for m, (name, _) in sorted(MECHANISMS.items()) if name in config]

    def describe(self, users: list[str] | None) -> list[dict]:
        if not users:
            out = []
            for user in entity_configs.names(self.zk, "users"):
                infos = self._scram(self._read(user)[0])
                if infos:
                    out.append({"user": user, "error_code": E.NONE, "error_message": None, "credential_infos": infos})
            return sorted(out, key=lambda r: r["user"])
        out = []
        for user in dict.fromkeys(users):
            if not user:
                out.append(_error(user, E.RESOURCE_NOT_FOUND, "Username must not be empty"))
            elif users.count(user) > 1:
                out.append(_error(user, E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user "
                                                              f"twice in a single request: {user}"))
            elif infos := self._scram(self._read(user)[0]):
                out.append({"user": user, "error_code": E.NONE, "error_message": None, "credential_infos": infos})
            else:
                out.append(_error(user, E.RESOURCE_NOT_FOUND, f"{NO_SUCH_USER}: {user}"))
        return out

    def alter(self, upsertions: list[tuple[str, int, int, bytes, bytes]],
              deletions: list[tuple[str, int]]) -> list[dict]:
        """upsertions: (user, mechanism, iterations, salt, salted password); deletions: (user, mechanism)."""
        errors: dict[str, tuple[int, str]] = {}
        for user, mech, iters, _, _ in upsertions:
            why = _invalid(user, mech) or (
                (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations") if iters > MAX_ITERATIONS else
                (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations") if iters < MIN_ITERATIONS else None)
            if why:
                errors[user] = why
        for user, mech in deletions:
            why = _invalid(user, mech)
            if why:
                errors[user] = why
        pairs = [(u, m) for u, m, *_ in upsertions if u not in errors] + [(u, m) for u, m in deletions
                                                                         if u not in errors]
        for user in {u for u, m in pairs if pairs.count((u, m)) > 1}:
            errors[user] = (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        results = [_error(u, code, msg) for u, (code, msg) in errors.items()]
        todo: dict[str, tuple[list, list]] = {}
        for user, mech, iters, salt, salted in upsertions:
            if user not in errors:
                todo.setdefault(user, ([], []))[0].append((mech, credential(mech, salt, salted, iters)))
        for user, mech in deletions:
            if user not in errors:
                todo.setdefault(user, ([], []))[1].append(mech)
        for user, (ups, dels) in todo.items():
            code, msg = self._alter_user(user, ups, dels)
            results.append(_error(user, code, msg) if code else
                           {"user": user, "error_code": E.NONE, "error_message": None})
        return results

    def _alter_user(self, user: str, ups: list, dels: list) -> tuple[int, str | None]:
        while True:
            config, version = self._read(user)
            if any(MECHANISMS[m][0] not in config for m in dels):
                return E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            for m in dels:
                config.pop(MECHANISMS[m][0])
            for m, value in ups:
                config[MECHANISMS[m][0]] = value
            if entity_configs.write(self.zk, "users", user, config, version):
                return E.NONE, None                        # else changed under us: read again


def _invalid(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _error(user: str, code: int, message: str) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}
