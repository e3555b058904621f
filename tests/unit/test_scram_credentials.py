"""services.broker.scram_credentials: the keys a SCRAM server keeps, checked against RFC 7677's
SCRAM-SHA-256 exchange, and Kafka's sanitized user names."""
import base64
import hashlib
import hmac

import pytest

from services.common.entity_configs import sanitize
from services.broker.scram_credentials import credential, iterations_of

pytestmark = pytest.mark.fast

# RFC 7677, section 3: user "user", password "pencil"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
AUTH_MESSAGE = (b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_the_stored_and_server_keys_verify_rfc_7677s_exchange():
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", SALT, 4096)        # what the client sends (salted password)
    fields = dict(kv.split("=", 1) for kv in credential(1, SALT, salted, 4096).split(","))
    stored_key, server_key = base64.b64decode(fields["stored_key"]), base64.b64decode(fields["server_key"])
    assert base64.b64decode(fields["salt"]) == SALT and iterations_of(credential(1, SALT, salted, 4096)) == 4096
    assert hmac.new(server_key, AUTH_MESSAGE, hashlib.sha256).digest() == SERVER_SIGNATURE
    client_signature = hmac.new(stored_key, AUTH_MESSAGE, hashlib.sha256).digest()
    client_key = bytes(p ^ s for p, s in zip(PROOF, client_signature))
    assert hashlib.sha256(client_key).digest() == stored_key        # the server accepts the client's proof


def test_user_names_are_url_encoded_as_kafkas_sanitizer_does():
    assert sanitize("alice") == "alice"
    assert sanitize("CN=a b*,O=x") == "CN%3Da%20b%2A%2CO%3Dx"
    assert sanitize("bj\u00f8rn") == "bj%C3%B8rn"
