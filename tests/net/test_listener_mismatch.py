"""A client whose ``security_protocol`` does not match the port fails at once, naming
the value to set; TLS certificate failures say what to change; every connection attempt
and its outcome is logged at DEBUG. Against the real broker's listeners."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

import pytest

from aiokproto import Admin, Producer
from aiokproto.errors import (
    IllegalSaslStateError,
    KafkaAuthenticationError,
    KafkaConfigError,
    KafkaConnectionError,
)
from aiokproto.net.framing import foreign_protocol
from aiokproto.protocol.messages.sasl_handshake import (
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from aiokproto.testing import LocalKafka
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply

ALICE = {
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "alice-secret",
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def fails_fast(error: type[Exception], bootstrap: str, **options: Any) -> str:
    """The text of the error ``start()`` raises within 2 s (nothing retried)."""
    admin = Admin(bootstrap_servers=bootstrap, **options)
    began = time.monotonic()
    try:
        with pytest.raises(error) as info:
            await admin.start()
    finally:
        await admin.close()
    assert time.monotonic() - began < 2, "a deterministic misconfiguration must not be retried"
    assert not info.value.retriable  # type: ignore[attr-defined]
    return str(info.value)


@pytest.mark.parametrize(
    ("listener", "client", "advice"),
    [
        ("SSL", "PLAINTEXT", 'set security_protocol="SSL" (or "SASL_SSL"'),
        ("SASL_SSL", "SASL_PLAINTEXT", 'set security_protocol="SASL_SSL"'),
    ],
)
async def test_plaintext_client_on_a_tls_port(
    kafka_secure: LocalKafka, listener: str, client: str, advice: str
) -> None:
    sasl = ALICE if client.startswith("SASL") else {}
    address = kafka_secure.bootstrap(listener)
    text = await fails_fast(KafkaConfigError, address, security_protocol=client, **sasl)
    # was: 60 s, then "frame length 352518912 ... not speaking the Kafka protocol"
    assert f"{address} speaks TLS (it answered with a TLS record, bytes 15 03" in text
    assert f'security_protocol is "{client}"' in text and advice in text


@pytest.mark.parametrize(
    ("listener", "client", "advice"),
    [
        ("PLAINTEXT", "SSL", 'set security_protocol="PLAINTEXT" (or "SASL_PLAINTEXT"'),
        ("SASL_PLAINTEXT", "SASL_SSL", 'set security_protocol="SASL_PLAINTEXT"'),
    ],
)
async def test_tls_client_on_a_plaintext_port(
    kafka_secure: LocalKafka, listener: str, client: str, advice: str
) -> None:
    sasl = ALICE if client.startswith("SASL") else {}
    address = kafka_secure.bootstrap(listener)
    text = await fails_fast(
        KafkaConfigError,
        address,
        security_protocol=client,
        ssl_cafile=str(kafka_secure.ca_file),
        **sasl,
    )
    # was: 60 s, then "cannot connect to host:port: " with no reason at all
    assert f"{address} is a plaintext listener, not TLS" in text
    assert f'security_protocol is "{client}"' in text and advice in text


@pytest.mark.parametrize(
    ("listener", "client", "advice"),
    [
        ("SASL_PLAINTEXT", "PLAINTEXT", 'set security_protocol="SASL_PLAINTEXT"'),
        ("SASL_SSL", "SSL", 'set security_protocol="SASL_SSL"'),
    ],
)
async def test_a_client_without_sasl_on_a_sasl_port(
    kafka_secure: LocalKafka, listener: str, client: str, advice: str
) -> None:
    address = kafka_secure.bootstrap(listener)
    tls = {"ssl_cafile": str(kafka_secure.ca_file)} if client == "SSL" else {}
    text = await fails_fast(KafkaConfigError, address, security_protocol=client, **tls)
    # was: 60 s, then "no bootstrap server answered ... was closed by the peer"
    assert f"{address} is a SASL listener (mechanisms: " in text and "PLAIN" in text
    assert f'security_protocol is "{client}"' in text and advice in text


async def test_a_connection_closed_by_a_listener_without_sasl_is_still_retried() -> None:
    """The probe that asks a server closing the first request whether it is a SASL
    listener does not turn other failures into errors that are not retried."""

    async def close_after_api_versions(rec: Received) -> Reply | None:
        if rec.api_key == SaslHandshakeRequest.API_KEY:  # as a listener without SASL does
            return Reply(response=SaslHandshakeResponse(error_code=IllegalSaslStateError.errno))
        return Reply(kind="close") if rec.api_key == 3 else None

    async with FakeBroker(script=close_after_api_versions) as fake:
        admin = Admin(bootstrap_servers=fake.bootstrap, default_api_timeout_ms=2000)
        with pytest.raises(KafkaConnectionError) as info:
            await admin.start()
        await admin.close()
    assert "was closed by the peer" in str(info.value)
    assert sum(r.api_key == 3 for r in fake.received) >= 2  # retried after the probe


async def test_an_untrusted_certificate_says_to_set_ssl_cafile(kafka_secure: LocalKafka) -> None:
    text = await fails_fast(
        KafkaAuthenticationError, kafka_secure.bootstrap("SSL"), security_protocol="SSL"
    )
    assert "TLS handshake with" in text and "set ssl_cafile to the CA certificate" in text


async def test_a_certificate_for_another_host_says_which_name(kafka_secure: LocalKafka) -> None:
    # the test certificate names localhost and 127.0.0.1, not [::ffff:127.0.0.1]
    port = kafka_secure.bootstrap("SSL").rsplit(":", 1)[1]
    try:
        socket.create_connection(("::ffff:127.0.0.1", int(port)), timeout=2).close()
    except OSError:
        pytest.skip("no IPv4-mapped IPv6 here")
    text = await fails_fast(
        KafkaAuthenticationError,
        f"[::ffff:127.0.0.1]:{port}",
        security_protocol="SSL",
        ssl_cafile=str(kafka_secure.ca_file),
    )
    assert "not valid for '::ffff:127.0.0.1'" in text and "ssl_check_hostname=False" in text


async def test_an_http_server_is_named() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        text = await fails_fast(KafkaConfigError, f"127.0.0.1:{port}")
    finally:
        server.close()
    assert "is an HTTP server (it answered 'HTTP/1.1 400 Bad Request')" in text


async def test_a_tls_handshake_reset_by_a_non_kafka_port_stays_retriable() -> None:
    """A reset in the TLS handshake is a mismatch only if the port then answers Kafka
    in plaintext: a TLS broker that dies mid-handshake is retried as before."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(10)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = client_for(
        f"127.0.0.1:{port}",
        security_protocol="SSL",
        bootstrap_timeout_ms=300,
        default_api_timeout_ms=1000,
    )
    try:
        with pytest.raises(KafkaConnectionError) as info:
            await client.start()
    finally:
        server.close()
    assert not isinstance(info.value, KafkaConfigError)
    assert "TLS handshake with" in str(info.value)


def test_foreign_first_bytes_are_recognised() -> None:
    assert foreign_protocol(bytes.fromhex("1503030002020a")) == "TLS"  # an alert
    assert foreign_protocol(bytes.fromhex("16030100")) == "TLS"  # a handshake
    assert foreign_protocol(b"\x15") == "TLS"
    assert foreign_protocol(b"HTTP/1.1 400 Bad Request\r\n") == "HTTP"
    assert foreign_protocol(b"\x00\x00\x01\x2c\x00\x00\x00\x00") is None  # a Kafka answer
    assert foreign_protocol(b"\x15\x00") is None
    assert foreign_protocol(b"") is None


# -- DEBUG: every connection attempt and its outcome ------------------------------------


async def test_debug_logs_each_attempt_and_outcome(
    kafka: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokproto.net.connection")
    dead = f"127.0.0.1:{closed_port()}"
    live = kafka.bootstrap_servers.split(",")[0]
    producer = Producer(bootstrap_servers=dead, bootstrap_timeout_ms=300)
    with pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "aiokproto.net.connection"]
    assert f"connecting to {dead} (PLAINTEXT, node -1, default)" in lines
    failed = [ln for ln in lines if ln.startswith(f"connecting to {dead} (PLAINTEXT")]
    assert any("failed after" in ln and "connection refused" in ln for ln in failed), lines
    caplog.clear()
    async with Producer(bootstrap_servers=live):
        pass
    lines = [r.getMessage() for r in caplog.records if r.name == "aiokproto.net.connection"]
    assert any(
        ln.startswith(f"connected to {live} (PLAINTEXT, node -1, default) in ") for ln in lines
    )
