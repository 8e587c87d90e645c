"""The Spark source on a broker that takes OAuth tokens only: the login given as Java's
``kafka.sasl.oauthbearer.*`` options, the provider shipped to the executors as its
settings (each fetches its own token). Part of ``make test-oauth``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from aiokproto import Producer
from aiokproto.oauth import OAuthClientCredentials
from aiokproto.testing import LocalKafka
from aiokproto.testing.oidc import LocalOidcServer
from tests.spark.helpers import read

pytestmark = pytest.mark.skipif(
    os.environ.get("AIOKPROTO_OAUTH") != "full", reason="make test-oauth (AIOKPROTO_OAUTH=full)"
)


def test_the_source_reads_with_java_oauth_options(
    spark: Any, kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, topic_name: str
) -> None:
    bootstrap = kafka_oauth.bootstrap("SASL_PLAINTEXT")
    client = oidc_server.client("kafka-client")

    async def produce() -> None:
        tokens = OAuthClientCredentials(oidc_server.token_url, client.client_id, client.secret)
        async with Producer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=tokens,
        ) as producer:
            for i in range(20):
                await producer.send_and_wait(topic_name, f"v{i}".encode(), partition=0)

    asyncio.run(produce())
    options = {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.login.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
        ),
        "kafka.sasl.oauthbearer.token.endpoint.url": oidc_server.token_url,
        "kafka.sasl.oauthbearer.client.credentials.client.id": client.client_id,
        "kafka.sasl.oauthbearer.client.credentials.client.secret": client.secret,
        "kafka.sasl.oauthbearer.scope": "kafka",
        "subscribe": topic_name,
    }
    rows = read(spark, bootstrap, **options).collect()
    assert sorted(r.value for r in rows) == sorted(f"v{i}".encode() for i in range(20))
