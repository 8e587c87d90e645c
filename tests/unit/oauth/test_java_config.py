"""Java's OAuth login settings read into ``OAuthClientCredentials`` keywords, and the
CLI's properties files and the Spark source's ``kafka.`` options that use them (pure)."""

from __future__ import annotations

import pytest

from aiokproto.errors import KafkaConfigError
from aiokproto.oauth.java_config import (
    JAVA_NAMES,
    from_java_config,
    is_oauth_jaas,
    provider_options,
    split_oauth,
)

URL = "https://idp.example/oauth2/token"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_kafka_4_property_names() -> None:
    props = {
        "sasl.login.callback.handler.class": HANDLER,
        "sasl.oauthbearer.jwt.retriever.class": (
            "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever"
        ),
        "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.client.credentials.client.id": "svc",
        "sasl.oauthbearer.client.credentials.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.login.refresh.window.factor": "0.9",
        "sasl.login.refresh.window.jitter": "0.1",
        "sasl.login.refresh.min.period.seconds": "30",
        "sasl.login.refresh.buffer.seconds": "120",
        "sasl.login.retry.backoff.ms": "200",
        "sasl.login.retry.backoff.max.ms": "5000",
        "sasl.oauthbearer.header.urlencode": "TRUE",
        "sasl.login.connect.timeout.ms": "3000",
        "sasl.login.read.timeout.ms": "4000",
    }
    assert provider_options(props) == {
        "token_endpoint_url": URL,
        "client_id": "svc",
        "client_secret": "s3cret",
        "scope": "kafka",
        "refresh_window_factor": 0.9,
        "refresh_window_jitter": 0.1,
        "refresh_min_period_s": 30.0,
        "refresh_buffer_s": 120.0,
        "retry_backoff_ms": 200,
        "retry_backoff_max_ms": 5000,
        "connect_timeout_ms": 3000,
        "read_timeout_ms": 4000,
        "header_urlencode": True,
    }


def test_the_older_jaas_form_with_extensions() -> None:
    jaas = (
        f'{MODULE} required clientId="svc" clientSecret="a \\"quoted\\" secret" '
        'scope=kafka extension_logicalCluster="lkc-1";'
    )
    assert is_oauth_jaas(jaas)
    rest, oauth = split_oauth(
        {"sasl.jaas.config": jaas, "sasl.oauthbearer.token.endpoint.url": URL, "acks": "all"}
    )
    assert rest == {"acks": "all"}
    assert provider_options(oauth) == {
        "token_endpoint_url": URL,
        "client_id": "svc",
        "client_secret": 'a "quoted" secret',
        "scope": "kafka",
        "extensions": {"logicalCluster": "lkc-1"},
    }


def test_the_assertion_settings() -> None:
    got = provider_options(
        {
            "sasl.oauthbearer.token.endpoint.url": URL,
            "sasl.oauthbearer.client.credentials.client.id": "svc",
            "sasl.oauthbearer.assertion.private.key.file": "/keys/svc.pem",
            "sasl.oauthbearer.assertion.private.key.passphrase": "pw",
            "sasl.oauthbearer.assertion.algorithm": "ES256",
            "sasl.oauthbearer.assertion.claim.aud": "https://idp.example",
            "sasl.oauthbearer.assertion.claim.exp.seconds": "120",
        }
    )
    assert got["private_key_file"] == "/keys/svc.pem" and got["assertion_lifetime_s"] == 120
    assert got["assertion_algorithm"] == "ES256" and got["private_key_passphrase"] == "pw"


def test_plain_jaas_is_not_taken() -> None:
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="p";'
    )
    assert split_oauth({"sasl.jaas.config": plain}) == ({"sasl.jaas.config": plain}, {})
    assert from_java_config({"sasl.jaas.config": plain}) is None


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"sasl.oauthbearer.scope": "k"}, r"needs kafka\.sasl\.oauthbearer\.token\.endpoint\.url"),
        ({"sasl.oauthbearer.token.endpoint.url": URL}, "client.credentials.client.id"),
        (
            {"sasl.login.callback.handler.class": "com.example.MyHandler"},
            "only Java's OAuthBearerLoginCallbackHandler",
        ),
        (
            {"sasl.login.retry.backoff.ms": "soon"},
            r"kafka\.sasl\.login\.retry\.backoff\.ms: expected a number",
        ),
        (
            {
                "sasl.oauthbearer.token.endpoint.url": URL,
                "sasl.oauthbearer.jwt.retriever.class": "o.a.k.c.s.o.JwtBearerJwtRetriever",
            },
            r"retriever\.class: only the client credentials grant.*not 'o\.a\.k\.c\.s\.o\.Jwt",
        ),
        (
            {"sasl.oauthbearer.header.urlencode": "yes"},
            r"kafka\.sasl\.oauthbearer\.header\.urlencode: expected true or false",
        ),
        (
            {"sasl.jaas.config": f'{MODULE} required tenant="x";'},
            "option 'tenant' is not supported",
        ),
        (  # a typo is named, not reported as the url missing
            {
                "sasl.oauthbearer.token.endpoint.uri": URL,
                "sasl.oauthbearer.client.credentials.client.id": "svc",
            },
            r"unknown OAuth client setting\(s\): kafka\.sasl\.oauthbearer\.token\.endpoint"
            r"\.uri \(did you mean sasl\.oauthbearer\.token\.endpoint\.url\?\)",
        ),
        (
            {"sasl.oauthbearer.token.endpoint.url": URL, "sasl.oauthbearer.expected.audience": "k"},
            r"kafka\.sasl\.oauthbearer\.expected\.audience \(a broker's setting",
        ),
    ],
)
def test_mistakes_name_the_property(props: dict[str, str], match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        provider_options(split_oauth(props)[1], prefix="kafka.")


def test_from_java_config_builds_the_provider() -> None:
    pytest.importorskip("httpx")
    tokens = from_java_config(
        {
            "sasl.oauthbearer.token.endpoint.url": URL,
            "sasl.oauthbearer.client.credentials.client.id": "svc",
            "sasl.oauthbearer.client.credentials.client.secret": "s",
            "sasl.login.refresh.buffer.seconds": "10",
            "bootstrap.servers": "ignored:9092",
        }
    )
    assert tokens.token_endpoint_url == URL and tokens.refresh.buffer_s == 10


def test_the_cli_properties_file_maps_the_oauth_login() -> None:
    pytest.importorskip("httpx")
    from aiokproto.cli.config_file import PropertiesError, known_java_names, map_java

    out = map_java(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER,
            "sasl.oauthbearer.token.endpoint.url": URL,
            "sasl.jaas.config": f'{MODULE} required clientId="svc" clientSecret="s";',
        }
    )
    tokens = out.client["sasl_oauth_token_provider"]
    assert (tokens.client_id, tokens.token_endpoint_url) == ("svc", URL)
    assert out.client["sasl_mechanism"] == "OAUTHBEARER"
    assert JAVA_NAMES <= set(known_java_names())
    with pytest.raises(PropertiesError, match=r"needs sasl\.oauthbearer\.token\.endpoint\.url"):
        map_java({"sasl.oauthbearer.scope": "kafka"})


def test_the_spark_options_map_the_oauth_login() -> None:
    pytest.importorskip("httpx")
    from aiokproto.spark.kafka_options import client_options

    got = client_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauthbearer.token.endpoint.url": URL,
            "kafka.sasl.oauthbearer.client.credentials.client.id": "svc",
            "kafka.sasl.oauthbearer.client.credentials.client.secret": "s",
            "kafka.sasl.oauthbearer.scope": "kafka",
        },
        "consumer",
    )
    assert got["sasl_oauth_token_provider"].scope == "kafka"
    with pytest.raises(KafkaConfigError, match=r"kafka\.sasl\.oauthbearer\.token\.endpoint\.url"):
        client_options(
            {
                "kafka.bootstrap.servers": "b:9092",
                "kafka.sasl.oauthbearer.client.credentials.client.id": "svc",
            },
            "consumer",
        )


def test_the_spark_options_take_the_jaas_form() -> None:
    pytest.importorskip("httpx")
    from aiokproto.spark.kafka_options import client_options

    got = client_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.login.callback.handler.class": HANDLER,
            "kafka.sasl.oauthbearer.token.endpoint.url": URL,
            "kafka.sasl.jaas.config": f'{MODULE} required clientId="svc" clientSecret="s";',
        },
        "producer",
    )
    tokens = got["sasl_oauth_token_provider"]
    assert tokens.client_id == "svc" and "sasl_plain_username" not in got
    # the source's Admin (offset look-ups on the driver) gets the provider too
    from aiokproto.spark.kafka_options import shared_only

    assert shared_only(got)["sasl_oauth_token_provider"] is tokens
