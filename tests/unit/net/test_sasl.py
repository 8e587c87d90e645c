"""SASL mechanisms without a broker: RFC vectors and refusal paths."""

from __future__ import annotations

import pytest

from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError
from aiokproto.net.sasl import OAuthBearerMechanism, PlainMechanism, ScramMechanism
from aiokproto.net.security import SecurityConfig

# RFC 7677 section 3 test vector (SCRAM-SHA-256).
NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha256_rfc7677_vector() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    assert m.first_message() == b"n,,n=user,r=" + NONCE.encode()
    assert m.respond(SERVER_FIRST) == CLIENT_FINAL
    assert m.respond(SERVER_FINAL) is None


def test_scram_rejects_forged_server_signature() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    m.respond(SERVER_FIRST)
    with pytest.raises(KafkaAuthenticationError, match="server signature"):
        m.respond(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")


def test_scram_rejects_nonce_not_extending_ours() -> None:
    m = ScramMechanism("SCRAM-SHA-512", "user", "pencil", nonce=NONCE)
    with pytest.raises(KafkaAuthenticationError, match="nonce"):
        m.respond(b"r=somethingelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_scram_escapes_username_and_reports_server_error() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "a=b,c", "pw", nonce="n")
    assert m.first_message() == b"n,,n=a=3Db=2Cc,r=n"
    with pytest.raises(KafkaAuthenticationError, match="invalid-proof"):
        m.respond(b"e=invalid-proof")


def test_plain_and_oauth_messages_and_secret_free_repr() -> None:
    plain = PlainMechanism("alice", "s3cret")
    assert plain.first_message() == b"\0alice\0s3cret"
    assert "s3cret" not in repr(plain)
    oauth = OAuthBearerMechanism("tok", {"traceId": "1"})
    assert oauth.first_message() == b"n,,\x01auth=Bearer tok\x01traceId=1\x01\x01"
    assert oauth.respond(b"") is None
    failing = OAuthBearerMechanism("tok")
    assert failing.respond(b'{"status":"invalid_token"}') == b"\x01"
    with pytest.raises(KafkaAuthenticationError, match="invalid_token"):
        failing.respond(b"")


def test_security_config_validates_and_hides_secrets() -> None:
    with pytest.raises(KafkaConfigError, match="security_protocol"):
        SecurityConfig(security_protocol="TLS")
    with pytest.raises(KafkaConfigError, match="sasl_plain_username"):
        SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256")
    with pytest.raises(KafkaConfigError, match="sasl_mechanism"):
        SecurityConfig(security_protocol="SASL_SSL", sasl_mechanism="KERBEROS")
    cfg = SecurityConfig(
        security_protocol="SASL_PLAINTEXT", sasl_plain_username="u", sasl_plain_password="hunter2"
    )
    assert "hunter2" not in repr(cfg)
