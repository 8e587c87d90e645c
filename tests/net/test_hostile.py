"""Hostile and broken peers: typed errors, bounded waits and memory, then recovery."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import pytest

from aiokproto.errors import (
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from aiokproto.net.connection import BrokerConnection, api_name
from aiokproto.net.connection_config import ConnectionConfig
from aiokproto.protocol.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from aiokproto.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from tests.clients import client_for
from tests.fake_broker import FakeBroker, Received, Reply
from tests.timers import timers_armed_by

FAST = ConnectionConfig(request_timeout_ms=300, socket_connection_setup_timeout_ms=1000)


def on_metadata(reply: Reply):  # type: ignore[no-untyped-def]
    def script(rec: Received) -> Reply | None:
        return reply if rec.api_key == 3 else None

    return script


async def test_silent_broker_times_out_within_request_timeout() -> None:
    async with FakeBroker(on_metadata(Reply("silent"))) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            start = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="request_timeout_ms"):
                await conn.send(MetadataRequest())
            assert time.monotonic() - start < 5  # a hang guard, not a speed target
            assert not conn.connected


@pytest.mark.parametrize(
    "reply",
    [
        Reply("raw", raw=b"\x00\x00\x00\x0cgarbage-bytes"[:16]),
        Reply("raw", raw=b"\x00\x00\x00\x02ab"),
        Reply("wrong_id"),
    ],
    ids=["garbage", "short-frame", "wrong-correlation-id"],
)
async def test_bad_answers_kill_the_connection_and_fail_all_in_flight(reply: Reply) -> None:
    async with FakeBroker(on_metadata(reply)) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            results = await asyncio.gather(
                conn.send(MetadataRequest()),
                conn.send(MetadataRequest()),
                return_exceptions=True,
            )
            assert all(isinstance(r, KafkaConnectionError) for r in results), results
            assert all(r.retriable for r in results if isinstance(r, KafkaConnectionError))
            assert not conn.connected
            with pytest.raises(KafkaConnectionError):
                await conn.send(MetadataRequest())


async def test_huge_frame_length_fails_fast_with_bounded_memory() -> None:
    tracemalloc.start()
    try:
        async with FakeBroker(
            on_metadata(Reply("raw", raw=b"\x7f\xff\xff\xf0" + b"x" * 64))
        ) as fake:
            async with BrokerConnection(fake.host, fake.port, FAST) as conn:
                with pytest.raises(KafkaConnectionError) as info:
                    await conn.send(MetadataRequest())
                assert isinstance(info.value.__cause__, KafkaProtocolError)
                assert "frame length" in str(info.value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


async def test_undecodable_body_is_a_protocol_error() -> None:
    # a valid frame and correlation id around a body that is not a Metadata response
    async with FakeBroker(on_metadata(Reply("body", raw=b"\x00\x00\x00\x00\xff\xff"))) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            with pytest.raises(KafkaConnectionError) as info:
                await conn.send(MetadataRequest())
            assert isinstance(info.value.__cause__, KafkaProtocolError)


async def test_peer_closing_mid_request_fails_in_flight() -> None:
    async with FakeBroker(on_metadata(Reply("close"))) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            with pytest.raises(KafkaConnectionError, match="closed by the peer"):
                await conn.send(MetadataRequest())


async def test_dead_port_is_a_quick_connection_error() -> None:
    async with FakeBroker() as fake:
        port = fake.port
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        await BrokerConnection("127.0.0.1", port, FAST).open()


async def test_client_recovers_on_the_next_request_after_a_bad_frame() -> None:
    broken = {"left": 1}

    def script(rec: Received) -> Reply | None:
        # Only the test's own request (the handshake names the client software).
        if rec.api_key == 18 and not rec.request.client_software_name and broken["left"]:
            broken["left"] -= 1
            return Reply("raw", raw=b"\xff\xff\xff\xff")
        return None

    async with FakeBroker(script) as fake:
        async with client_for(fake.bootstrap, request_timeout_ms=500) as client:
            first = await client.connection(1)
            with pytest.raises(KafkaConnectionError):
                await client.send(1, ApiVersionsRequest())
            response = await client.send(1, ApiVersionsRequest())
            assert response.error_code == 0
            assert not first.connected and (await client.connection(1)) is not first


async def test_dead_bootstrap_gives_a_timeout_naming_the_servers() -> None:
    async with FakeBroker() as fake:
        port = fake.port
    dead = client_for(f"127.0.0.1:{port}", default_api_timeout_ms=600, reconnect_backoff_max_ms=100)
    with pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{port}"):
        async with dead:
            pass


async def test_no_common_version_names_api_and_both_ranges() -> None:
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 18:
            return Reply(
                response=ApiVersionsResponse(
                    api_keys=[
                        ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=4),
                        ApiVersionsResponseApiVersion(api_key=3, min_version=99, max_version=99),
                    ]
                )
            )
        return None

    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            with pytest.raises(UnsupportedVersionError, match=r"Metadata.*v0-v13.*v99-v99"):
                conn.version_for(MetadataRequest)


async def test_apis_the_client_does_not_generate_are_kept_and_named_by_key() -> None:
    # a broker also advertises APIs no client sends (WriteTxnMarkers 27, the share
    # state RPCs 83-87; a controller Vote 52): not generated, still negotiated around
    def script(rec: Received) -> Reply | None:
        if rec.api_key == 18:
            keys = [(18, 0, 4), (3, 0, 12), (27, 0, 1), (52, 0, 2), (84, 0, 0), (9999, 0, 1)]
            return Reply(
                response=ApiVersionsResponse(
                    api_keys=[
                        ApiVersionsResponseApiVersion(api_key=k, min_version=lo, max_version=hi)
                        for k, lo, hi in keys
                    ]
                )
            )
        return None

    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            assert conn.api_versions[52] == (0, 2) and conn.api_versions[9999] == (0, 1)
            assert conn.version_for(MetadataRequest) == 12
            assert (await conn.send(MetadataRequest(), timeout_ms=5_000)).topics == []
    assert api_name(27) == "API 27" and api_name(52) == "API 52" and api_name(3) == "Metadata"


async def test_requests_are_pipelined_on_one_connection() -> None:
    seen = {"metadata": 0}

    async def script(rec: Received) -> Reply | None:
        if rec.api_key == 3 and not seen["metadata"]:
            # hold the first answer until all five requests have arrived
            seen["metadata"] = await asyncio.wait_for(until_five(), 5)
        return None

    async def until_five() -> int:
        await fake.wait_received(lambda got: sum(r.api_key == 3 for r in got) >= 5)
        return 5

    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            await asyncio.gather(
                *(conn.send(MetadataRequest(), timeout_ms=10_000) for _ in range(5))
            )
    assert fake.connections == 1
    assert seen["metadata"] == 5


async def test_acks0_style_requests_register_no_response() -> None:
    from aiokproto.protocol.messages.produce import ProduceRequest

    def script(rec: Received) -> Reply | None:
        return Reply("silent") if rec.api_key == 0 else None

    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            assert await conn.send(ProduceRequest(acks=0), expect_response=False) is None
            assert conn.in_flight == 0
            # the next request's answer still matches (no phantom entry in flight)
            response = await conn.send(MetadataRequest())
            assert response.cluster_id == "fake"
            assert [r.api_key for r in fake.received][-2:] == [0, 3]


async def test_idle_connection_is_closed() -> None:
    config = ConnectionConfig(connections_max_idle_ms=200)
    async with FakeBroker() as fake:
        conn = BrokerConnection(fake.host, fake.port, config)
        await conn.open()
        closed = asyncio.Event()
        conn.add_close_listener(lambda c, e: closed.set())
        await asyncio.wait_for(closed.wait(), 5)
        assert not conn.connected


def throttling(ms: int):  # type: ignore[no-untyped-def]
    """Throttle the first Metadata request only."""
    seen: list[Received] = []

    def script(rec: Received) -> Reply | None:
        if rec.api_key != 3:
            return None
        seen.append(rec)
        return Reply("answer", MetadataResponse(throttle_time_ms=ms if len(seen) == 1 else 0))

    return script


async def test_throttle_time_holds_back_the_next_request_kip219() -> None:
    config = ConnectionConfig(request_timeout_ms=1000, socket_connection_setup_timeout_ms=1000)
    async with FakeBroker(throttling(400)) as fake:
        async with BrokerConnection(fake.host, fake.port, config) as conn:
            await conn.send(MetadataRequest())
            answered = time.monotonic()
            assert 0.2 < conn.throttled_for <= 0.41  # uvloop keeps time in whole ms
            await conn.send(MetadataRequest())
            # the second request left only after the broker's throttle time
            assert time.monotonic() - answered >= 0.35
            assert conn.throttled_for < 0.002  # (uvloop: whole ms)


async def test_throttle_time_of_old_versions_is_the_brokers_business() -> None:
    # Before Metadata v6 the broker delayed its answer itself; waiting again is wrong.
    async with FakeBroker(throttling(400)) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            await conn.send(MetadataRequest(), 5)
            assert conn.throttled_for == 0


async def test_a_huge_throttle_time_is_capped_at_the_request_timeout() -> None:
    # One flipped bit in throttle_time_ms must not park the connection for weeks.
    async with FakeBroker(throttling(0x7FFFFFFF)) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            await conn.send(MetadataRequest())
            assert 0.2 < conn.throttled_for <= 0.31  # FAST's request_timeout_ms
            began = time.monotonic()
            async with asyncio.timeout(2):
                await conn.send(MetadataRequest())
            assert time.monotonic() - began < 0.6


async def test_requests_are_written_in_call_order_while_throttled() -> None:
    # Waiting out a throttle must not let a later request overtake an earlier one:
    # equal timer deadlines do not wake in a fixed order.
    config = ConnectionConfig(request_timeout_ms=2000, socket_connection_setup_timeout_ms=1000)
    async with FakeBroker(throttling(200)) as fake:
        async with BrokerConnection(fake.host, fake.port, config) as conn:
            await conn.send(MetadataRequest())
            sends = [
                asyncio.ensure_future(
                    conn.send(MetadataRequest(topics=[MetadataRequestTopic(name=f"t{i}")]))
                )
                for i in range(20)
            ]
            await asyncio.gather(*sends)
        names = [
            r.request.topics[0].name for r in fake.received if r.api_key == 3 and r.request.topics
        ]
        assert names == [f"t{i}" for i in range(20)]


async def test_a_slot_wait_is_bounded_by_the_request_timeout() -> None:
    # A broker that never answers fills every in-flight slot; the next request gives up
    # at its own timeout with a typed error and without being written.
    config = ConnectionConfig(
        request_timeout_ms=300,
        socket_connection_setup_timeout_ms=1000,
        max_in_flight_requests_per_connection=1,
    )

    def silent_metadata(rec: Received) -> Reply | None:
        return Reply("silent") if rec.api_key == 3 else None

    async with FakeBroker(silent_metadata) as fake:
        conn = BrokerConnection(fake.host, fake.port, config)
        await conn.open()
        first = asyncio.ensure_future(conn.send(MetadataRequest(), timeout_ms=5000))
        await asyncio.sleep(0)
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="could not be sent"):
            await conn.send(MetadataRequest())
        assert time.monotonic() - began < 1
        assert sum(1 for r in fake.received if r.api_key == 3) == 1
        conn.close()
        with pytest.raises(KafkaConnectionError):
            await first


@pytest.mark.parametrize("host", ["bad\x00host", "a" * 70 + ".example", "127.0.0.1"])
async def test_a_host_or_port_that_cannot_be_used_is_a_connection_error(host: str) -> None:
    # Broker addresses come from broker answers: whatever they say, a typed error.
    port = 70000 if host == "127.0.0.1" else 9092
    conn = BrokerConnection(host, port, FAST)
    with pytest.raises(KafkaConnectionError):
        await conn.open()


async def test_answered_requests_leave_one_timer_armed_not_one_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request's timeout hangs on one watchdog timer: answered requests cost no
    timer of their own (a timer per request was a heap push and a cancel each)."""
    async with FakeBroker() as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            await asyncio.sleep(0.35)  # the handshake's watchdog (300 ms) has fired
            armed = timers_armed_by(conn._watchdog, monkeypatch)
            for _ in range(20):
                await conn.send(MetadataRequest(), timeout_ms=10_000)
            assert len(armed) == 1, armed  # the first arms it; the rest are due later


async def test_a_silent_answer_after_answered_ones_still_times_out() -> None:
    """The watchdog, armed for the first request, fires after it was answered: it must
    re-arm for a later, unanswered one, which times out at its own time."""
    answered = 0

    def script(rec: Received) -> Reply | None:
        nonlocal answered
        if rec.api_key != 3:
            return None
        answered += 1
        return None if answered <= 2 else Reply("silent")

    async with FakeBroker(script) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            await conn.send(MetadataRequest())
            await conn.send(MetadataRequest())
            await asyncio.sleep(0.1)  # the third is due after the watchdog's time
            start = time.monotonic()
            async with asyncio.timeout(5):  # a hang guard: a watchdog that never fires
                with pytest.raises(KafkaTimeoutError, match="within 300 ms"):
                    await conn.send(MetadataRequest())
            assert time.monotonic() - start > 0.25  # its own timeout, not an early one
            assert not conn.connected


async def test_a_caller_deadline_before_the_request_timeout_tells_only_the_caller() -> None:
    async with FakeBroker(on_metadata(Reply("silent"))) as fake:
        async with BrokerConnection(fake.host, fake.port, FAST) as conn:
            async with asyncio.timeout(5):  # a hang guard
                with pytest.raises(KafkaTimeoutError, match="caller's timeout"):
                    await conn.send(MetadataRequest(), timeout_ms=100)
                assert conn.connected  # the broker still has its request timeout
                with pytest.raises(KafkaConnectionError):
                    # written behind the silent one: fails when the connection is killed
                    await conn.send(MetadataRequest(), timeout_ms=5_000)
            assert not conn.connected
