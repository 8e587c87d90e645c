"""The OIDC test server's settings and the broker settings that trust it (pure; the
server itself runs in tests/oauth)."""

from __future__ import annotations

from aiokproto.testing.oidc import (
    DEFAULT_CLIENTS,
    KAFKA_AUDIENCES,
    LocalOidcServer,
    broker_jvm_options,
    broker_overrides,
    server_properties,
)


def test_every_client_is_registered_with_its_secret_and_lifetime() -> None:
    text = server_properties(18080, DEFAULT_CLIENTS)
    assert "server.address=127.0.0.1" in text and "server.port=18080" in text
    assert "spring.security.oauth2.authorizationserver.issuer=http://127.0.0.1:18080" in text
    for client in DEFAULT_CLIENTS:
        prefix = f"spring.security.oauth2.authorizationserver.client.{client.client_id}"
        assert f"{prefix}.registration.client-secret={{noop}}{client.secret}" in text
        assert f"{prefix}.token.access-token-time-to-live={client.token_ttl_s}s" in text
        assert f"{prefix}.registration.authorization-grant-types=client_credentials" in text


def test_the_broker_validates_against_the_servers_jwks_and_audiences() -> None:
    server = LocalOidcServer(port=18081)
    props = broker_overrides(server)
    prefix = "listener.name.sasl_plaintext.oauthbearer"
    assert props[f"{prefix}.sasl.server.callback.handler.class"].endswith(
        "OAuthBearerValidatorCallbackHandler"
    )
    assert props["sasl.oauthbearer.jwks.endpoint.url"] == "http://127.0.0.1:18081/oauth2/jwks"
    assert props["sasl.oauthbearer.expected.issuer"] == "http://127.0.0.1:18081"
    assert props["sasl.oauthbearer.expected.audience"] == ",".join(KAFKA_AUDIENCES)
    assert int(props[f"{prefix}.connections.max.reauth.ms"]) > 0  # KIP-368 sessions
    assert "other-service" not in KAFKA_AUDIENCES  # the wrong-audience client
    (allowed,) = broker_jvm_options(server)
    assert allowed == (
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
        "http://127.0.0.1:18081/oauth2/jwks,http://127.0.0.1:18081/oauth2/token"
    )
