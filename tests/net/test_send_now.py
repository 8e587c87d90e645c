"""``BrokerConnection.send_now``: a request written in the caller's step, its answer
delivered to a callback from the read path; never ahead of a waiting ``send()``, never
on a socket that does not drain, and every callback released once when the connection
dies or the caller's timeout runs out."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from aiokproto.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from aiokproto.net.connection import BrokerConnection
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.protocol.headers import decode_request_header
from aiokproto.protocol.messages.api_versions import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from aiokproto.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from tests.fake_broker import FakeBroker, Received, Reply, encode_response

FAST = ConnectionConfig(request_timeout_ms=300, socket_connection_setup_timeout_ms=1000)


class Answers:
    """Records every callback: (response, error)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, KafkaError | None]] = []
        self.arrived = asyncio.Event()

    def __call__(self, response: Any, error: KafkaError | None) -> None:
        self.calls.append((response, error))
        self.arrived.set()

    async def wait(self, count: int = 1) -> None:
        async with asyncio.timeout(5):
            while len(self.calls) < count:
                self.arrived.clear()
                await self.arrived.wait()


def metadata_only(reply: Reply):  # type: ignore[no-untyped-def]
    def script(rec: Received) -> Reply | None:
        return reply if rec.api_key == 3 else None

    return script


def slots_free(conn: BrokerConnection) -> int:
    return conn._slots._value


async def test_written_in_the_callers_step_and_answered_from_the_read_path() -> None:
    async with FakeBroker() as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            free = slots_free(conn)
            answers = Answers()
            assert conn.ready_now()
            conn.send_now(MetadataRequest(topics=[]), conn.version_for(MetadataRequest), answers)
            assert conn.in_flight == 1 and slots_free(conn) == free - 1  # no await yet
            await answers.wait()
            [(response, error)] = answers.calls
            assert error is None and isinstance(response, MetadataResponse)
            assert conn.in_flight == 0 and slots_free(conn) == free
            # the connection goes on as before: send() after it is answered in order
            assert isinstance(await conn.send(MetadataRequest(topics=[])), MetadataResponse)
            assert [r.api_key for r in fake.received] == [18, 3, 3]


async def test_never_ahead_of_a_send_that_waits_for_a_slot() -> None:
    one_slot = ConnectionConfig(request_timeout_ms=2_000, max_in_flight_requests_per_connection=1)
    release = asyncio.Event()

    async def late(rec: Received) -> Reply | None:
        if rec.api_key == 3:
            await release.wait()
        return None

    async with FakeBroker(late) as fake:
        async with BrokerConnection(fake.host, fake.port, one_slot) as conn:
            first = asyncio.create_task(conn.send(MetadataRequest(topics=[])))
            second = asyncio.create_task(conn.send(MetadataRequest(topics=None)))
            await fake.wait_received(lambda r: len(r) == 2)
            await asyncio.sleep(0.01)  # the second send() waits for the one slot
            assert not conn.ready_now()
            with pytest.raises(RuntimeError, match="cannot write now"):
                conn.send_now(MetadataRequest(topics=[]), 4, Answers())
            release.set()
            await first
            await second
            assert conn.ready_now()
            assert [r.request.topics for r in fake.received[1:]] == [[], None]


async def test_the_connection_dying_releases_each_callback_once() -> None:
    async with FakeBroker(metadata_only(Reply("silent"))) as fake:
        conn = BrokerConnection(fake.host, fake.port, FAST)
        await conn.open()
        free = slots_free(conn)
        answers = Answers()
        version = conn.version_for(MetadataRequest)
        conn.send_now(MetadataRequest(topics=[]), version, answers)
        conn.send_now(MetadataRequest(topics=[]), version, answers)
        conn.close()
        assert [type(e) for _, e in answers.calls] == [KafkaConnectionError] * 2
        assert slots_free(conn) == free and not conn.ready_now()
        with pytest.raises(RuntimeError):
            conn.send_now(MetadataRequest(topics=[]), version, answers)
        await asyncio.sleep(0.05)
        assert len(answers.calls) == 2


async def test_the_callers_timeout_tells_the_callback_once() -> None:
    patient = ConnectionConfig(request_timeout_ms=2_000)
    async with FakeBroker(metadata_only(Reply("silent"))) as fake:
        async with BrokerConnection(fake.host, fake.port, patient) as conn:
            answers = Answers()
            conn.send_now(
                MetadataRequest(topics=[]),
                conn.version_for(MetadataRequest),
                answers,
                timeout_ms=50,
            )
            await answers.wait()
            [(_, error)] = answers.calls
            assert isinstance(error, KafkaTimeoutError) and "caller's timeout" in str(error)
            assert conn.connected  # the broker still has its request timeout to answer
            conn.close()
            assert len(answers.calls) == 1


async def test_a_failing_callback_leaves_the_connection_working() -> None:
    async with FakeBroker() as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:

            def broken(response: Any, error: KafkaError | None) -> None:
                raise ValueError("a bug in the caller")

            conn.send_now(MetadataRequest(topics=[]), conn.version_for(MetadataRequest), broken)
            assert isinstance(await conn.send(MetadataRequest(topics=[])), MetadataResponse)
            assert conn.connected and conn.ready_now()


async def test_a_callback_raising_cancelled_error_leaves_the_connection_working() -> None:
    # CancelledError is a BaseException: escaping the read path it made the transport
    # fail, killing the connection and every other request in flight on it
    async with FakeBroker() as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:

            def cancelled(response: Any, error: KafkaError | None) -> None:
                raise asyncio.CancelledError

            answers = Answers()
            version = conn.version_for(MetadataRequest)
            conn.send_now(MetadataRequest(topics=[]), version, cancelled)
            conn.send_now(MetadataRequest(topics=[]), version, answers)
            await answers.wait()
            assert answers.calls[0][1] is None
            assert conn.connected and conn.ready_now()


async def test_a_callback_raising_cancelled_error_on_close_releases_the_others() -> None:
    async with FakeBroker(metadata_only(Reply("silent"))) as fake:
        conn = BrokerConnection(fake.host, fake.port, FAST)
        await conn.open()
        free = slots_free(conn)
        dropped: list[Any] = []
        conn.add_close_listener(lambda c, e: dropped.append(e))

        def cancelled(response: Any, error: KafkaError | None) -> None:
            raise asyncio.CancelledError

        answers = Answers()
        version = conn.version_for(MetadataRequest)
        conn.send_now(MetadataRequest(topics=[]), version, cancelled)
        conn.send_now(MetadataRequest(topics=[]), version, answers)
        conn.close()
        assert [type(e) for _, e in answers.calls] == [KafkaConnectionError]
        assert slots_free(conn) == free and len(dropped) == 1


async def test_a_socket_that_does_not_drain_is_never_written_to_now() -> None:
    """A peer that answers the handshake, then stops reading: once the socket's
    buffers are full, send_now refuses (nothing half-written) and send() waits."""
    stop = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        header, _ = decode_request_header(await reader.readexactly(size))
        versions = ApiVersionsResponse(
            api_keys=[
                ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=4),
                ApiVersionsResponseApiVersion(api_key=3, min_version=0, max_version=12),
            ]
        )
        writer.write(
            encode_response(versions, 18, header.request_api_version, header.correlation_id)
        )
        await writer.drain()
        await stop.wait()  # reads nothing more
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = ConnectionConfig(request_timeout_ms=5_000, max_in_flight_requests_per_connection=1000)
    try:
        async with BrokerConnection("127.0.0.1", port, config) as conn:
            big = MetadataRequest(topics=[MetadataRequestTopic(name="t" * 200)] * 5_000)
            answers = Answers()
            written = 0
            while conn.ready_now() and written < 500:
                conn.send_now(big, 12, answers)
                written += 1
                await asyncio.sleep(0)
            assert not conn.ready_now() and 0 < written < 500
            with pytest.raises(RuntimeError, match="cannot write now"):
                conn.send_now(big, 12, answers)
            with pytest.raises(KafkaTimeoutError, match="does not drain"):
                await conn.send(big, 12, timeout_ms=100)
            # a socket that does not drain for a whole timeout is dead: every
            # callback is released
            assert not conn.connected
            assert len(answers.calls) == written
            assert all(isinstance(e, KafkaConnectionError) for _, e in answers.calls)
    finally:
        stop.set()
        server.close()
        await server.wait_closed()


async def test_a_request_without_an_answer_takes_no_slot() -> None:
    async with FakeBroker(metadata_only(Reply("silent"))) as fake:  # as acks=0 produce
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            free = slots_free(conn)
            conn.send_now(MetadataRequest(topics=[]), conn.version_for(MetadataRequest), None)
            assert conn.in_flight == 0 and slots_free(conn) == free
            await fake.wait_received(lambda r: len(r) == 2)
            assert conn.connected


async def test_a_due_throttle_or_reauthentication_leaves_the_write_to_send() -> None:
    """send() waits out a broker's throttle and runs a due KIP-368 re-authentication
    inside its gate, before writing: send_now never writes past either."""
    async with FakeBroker() as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            now = asyncio.get_running_loop().time()
            conn._throttled_until = now + 0.05
            assert not conn.ready_now()
            conn._throttled_until = 0.0
            conn._reauth_at = now
            assert not conn.ready_now()
            conn._reauth_at = now + 60
            assert conn.ready_now()


async def test_a_throttle_in_an_answer_read_for_send_now_holds_back_the_next_write() -> None:
    """KIP-219: throttle_time_ms in an answer delivered to a callback is noted as for
    send(): ready_now() is False until it has passed, and send() waits it out."""
    throttled_once: list[Received] = []

    def script(rec: Received) -> Reply | None:
        if rec.api_key != 3:
            return None
        throttled_once.append(rec)
        ms = 400 if len(throttled_once) == 1 else 0
        return Reply("answer", MetadataResponse(throttle_time_ms=ms))

    config = ConnectionConfig(request_timeout_ms=1000, socket_connection_setup_timeout_ms=1000)
    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, config) as conn:
            answers = Answers()
            conn.send_now(MetadataRequest(topics=[]), conn.version_for(MetadataRequest), answers)
            await answers.wait()
            loop = asyncio.get_running_loop()
            answered = loop.time()
            assert answers.calls[0][0].throttle_time_ms == 400
            assert 0.2 < conn.throttled_for <= 0.41 and not conn.ready_now()
            await conn.send(MetadataRequest(topics=[]))
            assert loop.time() - answered >= 0.35  # written once the throttle was over
            assert conn.ready_now()
