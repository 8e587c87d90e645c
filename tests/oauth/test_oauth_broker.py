"""The OAuth client-credentials login against real servers: a local OpenID Connect
provider (Spring Authorization Server) and a Kafka broker validating its tokens against
the JWKS (KIP-768). Producer, Consumer, ShareConsumer and Admin connect; a wrong
secret, an unreachable endpoint and a token for another audience fail quickly with
errors that name the fix; the CLI takes Java's properties file. A private-key JWT client
(RFC 7523, RS256 and ES256) produces and consumes, and a wrong key is a 401 naming the
key setting. Refresh and the mixed
Java/librdkafka check take longer: ``make test-oauth`` (``AIOKPROTO_OAUTH=full``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aiokproto import Admin, Consumer, NewTopic, Producer, ShareConsumer
from aiokproto.errors import KafkaAuthenticationError, KafkaError
from aiokproto.oauth import OAuthClientCredentials, OAuthTokenError
from aiokproto.protocol.messages import MetadataRequest
from aiokproto.testing import LocalKafka
from aiokproto.testing.jars import classpath
from aiokproto.testing.oidc import LocalOidcServer, oauth_kafka
from aiokproto.testing.ports import free_ports
from tests.cli.helpers import cli
from tests.clients import client_for

pytest.importorskip("httpx")

FULL = os.environ.get("AIOKPROTO_OAUTH") == "full"
full_only = pytest.mark.skipif(not FULL, reason="make test-oauth (AIOKPROTO_OAUTH=full)")


def provider(server: LocalOidcServer, client_id: str = "kafka-client", **kw: Any) -> Any:
    secret = kw.pop("secret", None) or server.client(client_id).secret
    return OAuthClientCredentials(server.token_url, client_id, secret, scope="kafka", **kw)


def options(kafka: LocalKafka, token_provider: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": kafka.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": token_provider,
    }


async def test_every_client_connects_with_one_provider(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, topic_name: str
) -> None:
    tokens = provider(oidc_server)
    conf = options(kafka_oauth, tokens)
    async with Admin(**conf) as admin:
        await admin.create_topics([NewTopic(topic_name, 1, 1)])
    async with Producer(**conf) as producer:
        await producer.send_and_wait(topic_name, b"via client credentials")
    async with Consumer(topic_name, auto_offset_reset="earliest", **conf) as consumer:
        record = await asyncio.wait_for(consumer.getone(), 15)
        assert record.value == b"via client credentials"
    async with ShareConsumer(topic_name, group_id=f"{topic_name}-share", **conf) as share:
        assert share.subscription() == {topic_name}
    # every client and connection shared the cached token: one fetch
    assert tokens.fetches == 1
    assert tokens.current is not None and tokens.current.claims
    assert tokens.current.claims["aud"] in ("kafka-client", ["kafka-client"])


async def test_a_wrong_secret_is_a_401_naming_the_client(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer
) -> None:
    started = time.monotonic()
    with pytest.raises(
        OAuthTokenError, match=r"HTTP 401 \(invalid_client\).*'kafka-client'"
    ) as info:
        async with Admin(**options(kafka_oauth, provider(oidc_server, secret="wrong"))) as admin:
            await admin.describe_cluster()
    assert info.value.status == 401
    assert isinstance(info.value, KafkaAuthenticationError)
    assert time.monotonic() - started < 5  # a 401 is not retried


async def test_an_unreachable_endpoint_fails_within_the_retry_budget(
    kafka_oauth: LocalKafka,
) -> None:
    (port,) = free_ports(1)  # nothing listens there
    tokens = OAuthClientCredentials(
        f"http://127.0.0.1:{port}/oauth2/token", "kafka-client", "s", retry_backoff_max_ms=500
    )
    started = time.monotonic()
    with pytest.raises(OAuthTokenError, match=r"cannot reach the token endpoint.*gave up after"):
        async with Admin(**options(kafka_oauth, tokens)) as admin:
            await admin.describe_cluster()
    assert time.monotonic() - started < 6


async def test_a_token_for_another_audience_is_refused_by_the_broker(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer
) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError, match="invalid_token") as info:
        async with Admin(**options(kafka_oauth, provider(oidc_server, "other-service"))) as admin:
            await admin.describe_cluster()
    # the message says which audience the token had and which broker setting checks it
    assert "aud='other-service'" in str(info.value)
    assert "sasl.oauthbearer.expected.audience" in str(info.value)
    assert time.monotonic() - started < 5


async def test_a_client_closed_mid_token_fetch_leaves_nothing_behind(
    kafka_oauth: LocalKafka,
) -> None:
    opened: list[asyncio.StreamWriter] = []
    asked = asyncio.Event()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(writer)
        asked.set()
        await reader.read()  # never answers; returns when the client hangs up
        writer.close()

    endpoint = await asyncio.start_server(hang, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{endpoint.sockets[0].getsockname()[1]}/token"
    async with endpoint:
        tokens = OAuthClientCredentials(url, "kafka-client", "s")
        admin = Admin(**options(kafka_oauth, tokens))
        starting = asyncio.create_task(admin.start())
        await asyncio.wait_for(asked.wait(), 10)  # connected to the broker, asking
        started = time.monotonic()
        starting.cancel()
        await admin.close()
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert time.monotonic() - started < 2
        for _ in range(100):  # the fetch's HTTP connection was closed with it
            if opened[0].is_closing():
                break
            await asyncio.sleep(0.01)
        assert opened[0].is_closing()
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "aiokproto-oauth-token"]


def java_properties(server: LocalOidcServer, client_id: str = "kafka-client") -> str:
    secret = server.client(client_id).secret
    return (
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=OAUTHBEARER\n"
        "sasl.login.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
        f"sasl.oauthbearer.token.endpoint.url={server.token_url}\n"
        "sasl.oauthbearer.scope=kafka\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        f'required clientId="{client_id}" clientSecret="{secret}";\n'
    )


def test_the_cli_reads_a_java_client_properties_file(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, tmp_path: Path
) -> None:
    props = tmp_path / "client.properties"
    props.write_text(java_properties(oidc_server))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "aiokproto",
            "cluster",
            "describe",
            "--config",
            str(props),
            "--bootstrap-servers",
            kafka_oauth.bootstrap("SASL_PLAINTEXT"),
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert '"brokers"' in run.stdout


def test_the_cli_logs_in_with_its_oauth_flags(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer
) -> None:
    """The flags, the secret from the environment as the help says: a user of Kafka's
    tools needs no properties file."""
    secret = oidc_server.client("kafka-client").secret
    run = cli(
        "cluster", "describe",
        "-b", kafka_oauth.bootstrap("SASL_PLAINTEXT"),
        "--security-protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "OAUTHBEARER",
        "--sasl-oauthbearer-token-endpoint-url", oidc_server.token_url,
        "--sasl-oauthbearer-client-id", "kafka-client",
        "--sasl-oauthbearer-scope", "kafka",
        "--output", "json",
        env={"AIOKPROTO_SASL_OAUTHBEARER_CLIENT_SECRET": secret},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert '"brokers"' in run.stdout


def test_a_cli_timeout_shorter_than_the_token_retries_names_the_token_error(
    kafka_oauth: LocalKafka,
) -> None:
    """--timeout 3 ends the wait while the token fetch still retries (10 s budget):
    the error must say why the broker never answered, not only that it did not."""
    (port,) = free_ports(1)  # nothing listens there
    started = time.monotonic()
    run = cli(
        "cluster", "describe",
        "-b", kafka_oauth.bootstrap("SASL_PLAINTEXT"),
        "--security-protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "OAUTHBEARER",
        "--sasl-oauthbearer-token-endpoint-url", f"http://127.0.0.1:{port}/oauth2/token",
        "--sasl-oauthbearer-client-id", "kafka-client",
        "--timeout", "3",
        env={"AIOKPROTO_SASL_OAUTHBEARER_CLIENT_SECRET": "s"},
    )  # fmt: skip
    assert run.returncode != 0
    assert "BootstrapError" in run.stderr, run.stderr
    assert "OAuth token fetch was still retrying" in run.stderr, run.stderr
    assert "cannot reach the token endpoint" in run.stderr, run.stderr
    assert time.monotonic() - started < 12


@full_only
async def test_an_expiring_token_is_refreshed_and_the_session_reauthenticated(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer
) -> None:
    # kafka-short's tokens live 6 s: the broker ends each session at the token's expiry
    # (KIP-368), so the one connection must re-authenticate with fresh tokens
    tokens = provider(oidc_server, "kafka-short")
    conf = options(kafka_oauth, tokens)
    async with client_for(conf.pop("bootstrap_servers"), **conf) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        first = tokens.current
        assert first is not None and first.expiry - first.issued_at <= 6
        first_deadline = conn._reauth_at
        assert first_deadline is not None  # the session ends with the token
        assert first_deadline <= asyncio.get_running_loop().time() + 6
        for _ in range(16):  # 16 s: the 6-s token outlived twice over
            await asyncio.sleep(1)
            await conn.send(MetadataRequest(topics=[]))
        assert conn.connected
        assert await client.connection(node) is conn
        assert conn._reauth_at is not None and conn._reauth_at > first_deadline + 6
    assert tokens.fetches >= 3
    assert tokens.current is not None and tokens.current.expiry > first.expiry + 6


@full_only
async def test_a_producer_closed_while_re_authentication_waits_for_a_token(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, topic_name: str
) -> None:
    import httpx

    # the endpoint answers the first request (relayed to the real server) and then
    # hangs, so the re-authentication at the 6-s token's end waits for a token
    served = 0
    hanging = asyncio.Event()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(
                (
                    ln.split(b":")[1]
                    for ln in head.split(b"\r\n")
                    if ln.lower().startswith(b"content-length")
                ),
                b"0",
            )
        )
        body = await reader.readexactly(length)
        served += 1
        if served > 1:
            hanging.set()
            await reader.read()  # until the client hangs up
            writer.close()
            return
        auth = next(
            ln.split(b":", 1)[1].strip()
            for ln in head.split(b"\r\n")
            if ln.lower().startswith(b"authorization")
        )
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                oidc_server.token_url,
                content=body,
                headers={
                    "Authorization": auth.decode(),
                    "Content-Type": "application/x-www-form-urlencoded",
                },
            )
        writer.write(
            b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (answer.status_code, len(answer.content))
            + answer.content
        )
        await writer.drain()
        writer.close()

    endpoint = await asyncio.start_server(relay, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{endpoint.sockets[0].getsockname()[1]}/token"
    async with endpoint:
        # close() delivers what is pending first: a hanging fetch bounds it by its
        # read timeout (10 s by default; 2 s here)
        tokens = OAuthClientCredentials(
            url,
            "kafka-short",
            oidc_server.client("kafka-short").secret,
            read_timeout_ms=2000,
            retry_backoff_max_ms=200,
        )
        producer = Producer(**options(kafka_oauth, tokens))
        await producer.start()
        await producer.send_and_wait(topic_name, b"before")
        sending = asyncio.create_task(_keep_sending(producer, topic_name))
        await asyncio.wait_for(hanging.wait(), 20)  # a connection re-authenticates, waiting
        started = time.monotonic()
        await producer.close()
        closed_in = time.monotonic() - started
        # the record waiting for the re-authentication failed with the token error
        with pytest.raises(KafkaError):
            await asyncio.wait_for(sending, 5)
        assert closed_in < 6
        await asyncio.sleep(0.1)
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "aiokproto-oauth-token"]


async def _keep_sending(producer: Producer[Any, Any], topic: str) -> None:
    while True:
        await producer.send_and_wait(topic, b"during")
        await asyncio.sleep(0.5)


@full_only
async def test_a_broker_fetching_the_jwks_over_http_takes_the_tokens(
    oidc_server: LocalOidcServer, kafka_version: str
) -> None:
    # the session broker reads the key set from its file (it may start before the
    # server answers); Kafka's JWKS endpoint client is checked here, on a second broker
    oidc_server.wait_ready()
    kafka = oauth_kafka(oidc_server, kafka_version, jwks="http")
    await asyncio.to_thread(kafka.start)
    try:
        async with Admin(**options(kafka, provider(oidc_server))) as admin:
            assert (await admin.describe_cluster()).brokers
        with pytest.raises(KafkaAuthenticationError, match="invalid_token"):
            async with Admin(**options(kafka, provider(oidc_server, "other-service"))) as admin:
                await admin.describe_cluster()
    finally:
        await asyncio.to_thread(kafka.stop)


@full_only
async def test_java_and_librdkafka_authenticate_to_the_same_listener(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, tmp_path: Path, topic_name: str
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = kafka_oauth.bootstrap("SASL_PLAINTEXT")
    props = tmp_path / "client.properties"
    props.write_text(java_properties(oidc_server))
    # the Java client (Kafka's own TopicCommand) creates the topic
    java = await asyncio.to_thread(
        subprocess.run,
        [
            "java",
            f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oidc_server.token_url}",
            "-cp",
            classpath(kafka_oauth.version),
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            str(props),
            "--create",
            "--topic",
            topic_name,
            "--partitions",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert java.returncode == 0, java.stdout + java.stderr
    # librdkafka's own OIDC login produces
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "kafka-client",
            "sasl.oauthbearer.client.secret": oidc_server.client("kafka-client").secret,
            "sasl.oauthbearer.token.endpoint.url": oidc_server.token_url,
            "sasl.oauthbearer.scope": "kafka",
        }
    )
    producer.produce(topic_name, b"from librdkafka")
    assert producer.flush(30) == 0
    # and ours reads it
    conf = options(kafka_oauth, provider(oidc_server))
    async with Consumer(topic_name, auto_offset_reset="earliest", **conf) as consumer:
        record = await asyncio.wait_for(consumer.getone(), 15)
    assert record.value == b"from librdkafka"


def key_provider(server: LocalOidcServer, client_id: str, key_file: Path | None = None) -> Any:
    algorithm = server.client(client_id).assertion_algorithm
    assert algorithm is not None
    return OAuthClientCredentials(
        server.token_url,
        client_id,
        private_key_file=key_file or server.private_key_file(client_id),
        assertion_algorithm=algorithm,
        scope="kafka",
    )


@pytest.mark.parametrize("client_id", ["kafka-jwt", "kafka-jwt-es"])
async def test_a_private_key_jwt_client_produces_and_consumes(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, topic_name: str, client_id: str
) -> None:
    # RFC 7523 client authentication: the server checks the assertion against the
    # client's registered public key set (RS256 and ES256), the broker the token
    tokens = key_provider(oidc_server, client_id)
    conf = options(kafka_oauth, tokens)
    async with Producer(**conf) as producer:
        await producer.send_and_wait(topic_name, b"via a client assertion")
    async with Consumer(topic_name, auto_offset_reset="earliest", **conf) as consumer:
        record = await asyncio.wait_for(consumer.getone(), 15)
        assert record.value == b"via a client assertion"
    assert tokens.fetches == 1
    assert tokens.current is not None and tokens.current.claims
    assert tokens.current.claims["aud"] in (client_id, [client_id])


async def test_an_assertion_signed_with_another_key_is_a_401_naming_the_key(
    kafka_oauth: LocalKafka, oidc_server: LocalOidcServer, tmp_path: Path
) -> None:
    from aiokproto.testing.oidc import assertion_key

    wrong, _ = assertion_key(tmp_path, "kafka-jwt", "RS256")  # not the registered key
    started = time.monotonic()
    with pytest.raises(
        OAuthTokenError,
        match=r"HTTP 401 \(invalid_client\).*'kafka-jwt'.*assertion.private.key.file",
    ) as info:
        async with Admin(**options(kafka_oauth, key_provider(oidc_server, "kafka-jwt", wrong))):
            pass
    assert info.value.status == 401
    assert time.monotonic() - started < 5  # a 401 is not retried
