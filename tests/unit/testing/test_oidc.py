"""The OIDC test server's settings and the broker settings that trust it (pure; the
server itself runs in tests/oauth)."""

from __future__ import annotations

import json
from pathlib import Path

from aiokproto.testing.oidc import (
    DEFAULT_CLIENTS,
    KAFKA_AUDIENCES,
    LocalOidcServer,
    assertion_key,
    broker_jvm_options,
    broker_overrides,
    server_properties,
    signing_key,
)


def test_every_client_is_registered_with_its_secret_and_lifetime(tmp_path: Path) -> None:
    text = server_properties(18080, DEFAULT_CLIENTS, tmp_path / "k.json")
    assert f"aiokproto.jwk-file={tmp_path / 'k.json'}" in text
    assert "server.address=127.0.0.1" in text and "server.port=18080" in text
    assert "spring.security.oauth2.authorizationserver.issuer=http://127.0.0.1:18080" in text
    for client in DEFAULT_CLIENTS:
        prefix = f"spring.security.oauth2.authorizationserver.client.{client.client_id}"
        if client.assertion_algorithm is None:
            assert f"{prefix}.registration.client-secret={{noop}}{client.secret}" in text
        assert f"{prefix}.token.access-token-time-to-live={client.token_ttl_s}s" in text
        assert f"{prefix}.registration.authorization-grant-types=client_credentials" in text


def test_the_signing_key_is_a_private_jwk_and_its_public_set(tmp_path: Path) -> None:
    private, public = signing_key(tmp_path)
    jwk = json.loads(private.read_text())
    (published,) = json.loads(public.read_text())["keys"]
    assert jwk["kty"] == "RSA" and jwk["alg"] == "RS256" and {"d", "p", "q"} <= set(jwk)
    assert published == {k: v for k, v in jwk.items() if k not in "d p q dp dq qi".split()}
    assert private.stat().st_mode & 0o077 == 0


def test_the_broker_validates_against_the_servers_jwks_and_audiences() -> None:
    server = LocalOidcServer(port=18081)  # not started: its key files exist already
    assert broker_overrides(server, jwks="http")["sasl.oauthbearer.jwks.endpoint.url"] == (
        "http://127.0.0.1:18081/oauth2/jwks"
    )
    props = broker_overrides(server)  # the key set from its file, by default
    prefix = "listener.name.sasl_plaintext.oauthbearer"
    assert props[f"{prefix}.sasl.server.callback.handler.class"].endswith(
        "OAuthBearerValidatorCallbackHandler"
    )
    assert props["sasl.oauthbearer.jwks.endpoint.url"] == server.jwks_file.as_uri()
    assert props["sasl.oauthbearer.expected.issuer"] == "http://127.0.0.1:18081"
    assert props["sasl.oauthbearer.expected.audience"] == ",".join(KAFKA_AUDIENCES)
    assert int(props[f"{prefix}.connections.max.reauth.ms"]) > 0  # KIP-368 sessions
    assert "other-service" not in KAFKA_AUDIENCES  # the wrong-audience client
    assert server.jwks_file.is_file()
    server.stop()
    assert not server.jwks_file.exists()
    (allowed,) = broker_jvm_options(server, jwks="http")
    assert allowed == (
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
        "http://127.0.0.1:18081/oauth2/jwks,http://127.0.0.1:18081/oauth2/token"
    )


def test_a_private_key_jwt_client_is_registered_with_its_key_set_url(tmp_path: Path) -> None:
    text = server_properties(18080, DEFAULT_CLIENTS, tmp_path / "k.json", "http://h:1")
    for client_id, algorithm in (("kafka-jwt", "RS256"), ("kafka-jwt-es", "ES256")):
        prefix = f"spring.security.oauth2.authorizationserver.client.{client_id}"
        assert f"{prefix}.registration.client-authentication-methods=private_key_jwt" in text
        assert f"{prefix}.jwk-set-uri=http://h:1/{client_id}" in text
        assert f"{prefix}.token-endpoint-authentication-signing-algorithm={algorithm}" in text
        assert f"{prefix}.registration.client-secret" not in text  # no secret to fall back on
        assert client_id in KAFKA_AUDIENCES  # the broker takes their tokens


def test_an_assertion_key_is_a_pem_and_its_public_jwk_set(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    for algorithm, kty in (("RS256", "RSA"), ("ES256", "EC")):
        private, public = assertion_key(tmp_path, f"c-{kty}", algorithm)
        load_pem_private_key(private.read_bytes(), None)
        (jwk,) = json.loads(public.read_text())["keys"]
        assert jwk["kty"] == kty and jwk["alg"] == algorithm and jwk["kid"] == f"c-{kty}"
        assert "d" not in jwk
        assert private.stat().st_mode & 0o077 == 0
    ec = json.loads((tmp_path / "c-EC-jwks.json").read_text())["keys"][0]
    assert ec["crv"] == "P-256" and len(ec["x"]) == len(ec["y"]) == 43  # 32 bytes each
