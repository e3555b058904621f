"""SCRAM credentials through librdkafka's Admin API against a real local cluster: upserted, described
(mechanism and iterations), refused as Kafka refuses them, deleted, and stored in ZooKeeper in Kafka's
layout with the keys derived from the salted password librdkafka sent."""
import base64
import hashlib
import hmac
import json
import uuid

import pytest

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)


def _code(fut):
    try:
        fut.result(30)
        return None
    except KafkaException as e:
        return e.args[0].code()


def test_credentials_are_upserted_described_refused_and_deleted_as_kafka_does(kcluster):
    from kazoo.client import KazooClient
    from eoslab.common import auth
    admin = AdminClient({"bootstrap.servers": kcluster.info().kafka_bootstrap})
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    [fut] = admin.describe_user_scram_credentials([alice]).values()
    assert _code(fut) == KafkaError.RESOURCE_NOT_FOUND
    ups = [UserScramCredentialUpsertion(alice, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"pencil",
                                        b"salt-a"),
           UserScramCredentialUpsertion(alice, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pencil"),
           UserScramCredentialUpsertion(bob, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")]
    outcome = {u: _code(f) for u, f in admin.alter_user_scram_credentials(ups).items()}
    assert outcome == {alice: None, bob: KafkaError.UNACCEPTABLE_CREDENTIAL}         # too few iterations
    [fut] = admin.describe_user_scram_credentials([alice]).values()
    infos = {(i.mechanism, i.iterations) for i in fut.result(30).scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)}
    listed = admin.describe_user_scram_credentials().result(30)
    assert alice in listed and bob not in listed

    zk = KazooClient(hosts=kcluster.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(kcluster.secret_path)))
    zk.start()
    try:
        stored = json.loads(zk.get(f"/config/users/{alice}")[0])["config"]["SCRAM-SHA-256"]
    finally:
        zk.stop()
    fields = dict(kv.split("=", 1) for kv in stored.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", b"salt-a", 8192)
    assert base64.b64decode(fields["server_key"]) == hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    assert (base64.b64decode(fields["salt"]), fields["iterations"]) == (b"salt-a", "8192")

    gone = [UserScramCredentialDeletion(alice, ScramMechanism.SCRAM_SHA_512),
            UserScramCredentialDeletion(bob, ScramMechanism.SCRAM_SHA_256)]
    outcome = {u: _code(f) for u, f in admin.alter_user_scram_credentials(gone).items()}
    assert outcome == {alice: None, bob: KafkaError.RESOURCE_NOT_FOUND}
    [fut] = admin.describe_user_scram_credentials([alice]).values()
    assert [(i.mechanism, i.iterations) for i in fut.result(30).scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
