"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) on a broker, served from
ZooKeeper as Kafka's ZooKeeper-mode brokers serve them (services.broker.scram_credentials).

Guarantees: DescribeUserScramCredentials needs DESCRIBE on the cluster and AlterUserScramCredentials
ALTER on it (CLUSTER_AUTHORIZATION_FAILED for the whole request, or for every user asked, otherwise);
any broker answers both, each alteration a conditional write of the user's node. The credentials are
stored and described only: the lab's Kafka listener is PLAINTEXT and authenticates no one with them.
"""
from __future__ import annotations

from eoslab.common import acl
from eoslab.common.errors import E
from services.broker.scram_credentials import ScramCredentials

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
VERSIONS = {DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ALTER_USER_SCRAM_CREDENTIALS: (0, 0)}


def register_scram_apis(apis) -> None:
    store = ScramCredentials(apis.s.zk)

    def describe(header, req) -> dict:
        if not apis.auth.authorize_cluster(acl.DESCRIBE):
            return {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "results": []}
        users = None if req.users is None else [u.name for u in req.users]
        return {"error_code": E.NONE, "error_message": None, "results": store.describe(users)}

    def alter(header, req) -> dict:
        if not apis.auth.authorize_cluster(acl.ALTER):
            users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
            return {"results": [{"user": u, "error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                                for u in users]}
        return {"results": store.alter(
            [(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
             for u in req.upsertions], [(d.name, int(d.mechanism)) for d in req.deletions])}

    apis.register(DESCRIBE_USER_SCRAM_CREDENTIALS, *VERSIONS[DESCRIBE_USER_SCRAM_CREDENTIALS], describe)
    apis.register(ALTER_USER_SCRAM_CREDENTIALS, *VERSIONS[ALTER_USER_SCRAM_CREDENTIALS], alter)
