"""Hostile use of BrokerConnection: the FIFO gate, timeouts and re-authentication."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokproto.errors import KafkaError, KafkaTimeoutError
from aiokproto.net.connection import BrokerConnection
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.protocol.messages.metadata import MetadataRequest
from aiokproto.testing import LocalKafka
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply


def _user(kafka_secure: LocalKafka) -> tuple[str, str]:
    from tests.net.test_broker import _user as user

    return user(kafka_secure)


async def test_requests_keep_call_order_across_a_reauthentication(
    kafka_secure: LocalKafka,
) -> None:
    """Expected (DESIGN: requests are written in call order; re-authentication holds a
    lock so requests do not interleave with the SASL exchange): when request A starts
    a KIP-368 re-authentication, a request B called after A is written after A, and
    never between SaslHandshake and SaslAuthenticate. Observed: A clears _reauth_at
    before its first await, so B skips the re-authentication and goes through the gate
    at once: written before A, in the middle of the SASL exchange."""
    from aiokproto.testing.broker_config import REAUTH_TEST_SESSION_MS

    username, password = _user(kafka_secure)
    async with client_for(
        kafka_secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=username,
        sasl_plain_password=password,
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        assert conn._reauth_at is not None
        await asyncio.sleep(REAUTH_TEST_SESSION_MS / 1000)  # re-authentication is due
        assert conn._reauth_at <= asyncio.get_running_loop().time()
        written: list[int] = []  # api keys in write order
        transport = conn._transport
        assert transport is not None
        real_write = transport.write

        def spy(data: Any) -> None:
            buf = bytes(data)
            written.append(int.from_bytes(buf[4:6], "big"))
            real_write(data)

        transport.write = spy  # type: ignore[method-assign]
        outcomes: list[str] = []

        async def call(request: Any, name: str) -> None:
            try:
                await conn.send(request)
                outcomes.append(f"{name} ok")
            except KafkaError as exc:
                outcomes.append(f"{name} {exc!r}")

        async with asyncio.timeout(10):
            a = asyncio.ensure_future(call(MetadataRequest(topics=[]), "A"))
            await asyncio.sleep(0)  # A is called first and starts the re-authentication
            b = asyncio.ensure_future(call(MetadataRequest(topics=[]), "B"))
            await asyncio.gather(a, b)
        # 17 SaslHandshake, 36 SaslAuthenticate, then the two Metadata requests
        assert written[:2] == [17, 36], (written, outcomes)
        assert sorted(outcomes) == ["A ok", "B ok"], (written, outcomes)


async def test_a_request_queued_behind_a_slot_waiter_keeps_its_own_timeout() -> None:
    """Expected (DESIGN: "Every send() is bounded: waiting for a slot or a draining
    socket counts against its timeout"): a request with a 300 ms timeout gives up after
    about 300 ms with KafkaTimeoutError, whatever the requests before it wait for.
    Observed: it waits, unbounded, for the FIFO gate while an earlier request (timeout
    3 s) waits inside the gate for a slot, and only then fails: its own timeout is
    ignored for as long as the earlier request's (3 s here, request_timeout_ms or a
    rebalance timeout in real use)."""
    config = ConnectionConfig(
        request_timeout_ms=3000,
        socket_connection_setup_timeout_ms=1000,
        max_in_flight_requests_per_connection=1,
    )

    def silent_metadata(rec: Received) -> Reply | None:
        return Reply("silent") if rec.api_key == 3 else None

    async with FakeBroker(silent_metadata) as fake:
        conn = BrokerConnection(fake.host, fake.port, config)
        await conn.open()
        try:
            first = asyncio.ensure_future(conn.send(MetadataRequest(), timeout_ms=10_000))
            await asyncio.sleep(0)  # holds the only slot
            second = asyncio.ensure_future(conn.send(MetadataRequest(), timeout_ms=3000))
            await asyncio.sleep(0)  # waits for the slot, inside the gate
            began = time.monotonic()
            with pytest.raises(KafkaTimeoutError):
                async with asyncio.timeout(6):
                    await conn.send(MetadataRequest(), timeout_ms=300)
            took = time.monotonic() - began
            assert took < 1.0, f"a 300 ms request took {took:.1f} s to time out"
        finally:
            conn.close()
            for task in (first, second):
                with pytest.raises((KafkaError, asyncio.CancelledError)):
                    await task


async def test_time_spent_queueing_does_not_kill_a_healthy_connection() -> None:
    """Expected: a broker that answers every request 400 ms after reading it is
    healthy; requests that waited in the client for a free slot may give up at their
    own deadline, but the connection is not torn down (which would fail every other
    request on it). Observed (since fixed): a request's timeout was armed at the
    caller's deadline, so a request written with little of its budget left "got no
    response within request_timeout_ms" and the connection was killed."""
    config = ConnectionConfig(
        request_timeout_ms=1000,
        socket_connection_setup_timeout_ms=1000,
        max_in_flight_requests_per_connection=2,
    )

    async def slow_metadata(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            await asyncio.sleep(0.4)  # one at a time, 400 ms each
        return None

    async with FakeBroker(slow_metadata) as fake:
        conn = BrokerConnection(fake.host, fake.port, config)
        await conn.open()
        outcomes: list[str] = []

        async def one(i: int) -> None:
            try:
                await conn.send(MetadataRequest(topics=[]))
                outcomes.append(f"{i} ok")
            except KafkaError as exc:
                outcomes.append(f"{i} {type(exc).__name__}")

        try:
            async with asyncio.timeout(10):
                await asyncio.gather(*(one(i) for i in range(4)))
            assert conn.connected, f"the connection was killed: {outcomes}"
        finally:
            conn.close()
