"""The sender's requests written by ``send_now`` in the drain loop's own step, and what
they meet: a lost wake-up, KIP-368 re-authentication, an answer that never comes (an
idempotent retry), stop() and cancellation while they are out."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from aiokproto.consumer import Consumer
from aiokproto.errors import KafkaTimeoutError
from aiokproto.net.connection import BrokerConnection
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from aiokproto.testing import LocalKafka
from tests.faults.netfaults import read_log
from tests.faults.proxy import PRODUCE, FaultProxy
from tests.producer.helpers import FAST, create_topic


async def test_a_request_that_ends_in_the_drain_pass_does_not_lose_the_wake_up(
    kafka: Any, topic_name: str
) -> None:
    # acks=0 written now ends in the drain loop's own pass: its wake() found no waiter
    # and was lost, so batches queued behind the in-flight limit waited for the next
    # send() (none came: flush() hung until delivery_timeout_ms)
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        acks=0,
        linger_ms=0,
        batch_size=300,
        max_in_flight_requests_per_connection=1,
        delivery_timeout_ms=5_000,
        request_timeout_ms=4_000,
        **FAST,
    ) as p:
        await (await p.send(topic_name, b"warm-up", partition=0))  # the connection is open
        futures = [await p.send(topic_name, b"." * 100, partition=0) for _ in range(20)]
        for future in futures:
            await future  # every record of 10 batches is written


# -- what send_now meets: re-authentication, a lost answer, stop(), cancellation -------


class SendNowCalls:
    """Counts ``BrokerConnection.send_now`` calls by (purpose, API key)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        original = BrokerConnection.send_now

        def counting(conn: BrokerConnection, request: Any, *args: Any, **kwargs: Any) -> None:
            self.calls[conn.purpose, request.API_KEY] += 1
            original(conn, request, *args, **kwargs)

        monkeypatch.setattr(BrokerConnection, "send_now", counting)

    def __getitem__(self, key: tuple[str, int]) -> int:
        return self.calls[key]


class Reauths:
    """Counts KIP-368 re-authentications by connection purpose."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_purpose: Counter[str] = Counter()
        original = BrokerConnection._reauthenticate

        async def counting(conn: BrokerConnection) -> None:
            await original(conn)
            self.by_purpose[conn.purpose] += 1

        monkeypatch.setattr(BrokerConnection, "_reauthenticate", counting)


def produce_conn(p: Producer) -> BrokerConnection:
    assert p._client is not None
    [conn] = [c for c in p._client._conns.values() if c.purpose == "produce"]
    return conn


async def test_sasl_reauthentication_while_produce_and_fetch_go_by_send_now(
    kafka_secure: LocalKafka, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PLAIN sessions of 3 s (KIP-368) while a producer at linger 0 and a consumer
    write their Produce and Fetch requests with send_now for 8.5 s: a due
    re-authentication takes the send() path (it may suspend), the requests around it
    keep their order, and every record is written once and read once, in order."""
    from aiokproto.testing.broker_config import REAUTH_TEST_SESSION_MS

    await create_topic(kafka_secure.bootstrap_servers, topic_name)
    user = kafka_secure.users[0]
    sasl: dict[str, Any] = {
        "bootstrap_servers": kafka_secure.bootstrap("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user.username,
        "sasl_plain_password": user.password,
    }
    calls = SendNowCalls(monkeypatch)
    reauths = Reauths(monkeypatch)
    tp = TopicPartition(topic_name, 0)
    sent: list[bytes] = []
    got: list[tuple[int, bytes]] = []
    async with (
        Producer(linger_ms=0, **sasl, **FAST) as p,
        Consumer(auto_offset_reset="earliest", fetch_max_wait_ms=100, **sasl) as c,
    ):
        c.assign([tp])
        done = asyncio.Event()

        async def read() -> None:
            while not (done.is_set() and len(got) >= len(sent)):
                for records in (await c.getmany(timeout_ms=200)).values():
                    got.extend((r.offset, r.value) for r in records)

        reader = asyncio.create_task(read())
        loop = asyncio.get_running_loop()
        end = loop.time() + 8.5  # 2-3 re-authentications of every connection
        handles = []
        while loop.time() < end:
            value = b"%06d" % len(sent)
            sent.append(value)
            handles.append(await p.send(topic_name, value))
            await asyncio.sleep(0.005)
        metas = await asyncio.wait_for(asyncio.gather(*handles), 20)
        done.set()
        await asyncio.wait_for(reader, 20)
    assert [m.offset for m in metas] == list(range(len(sent)))
    assert got == list(enumerate(sent))  # each once, in order
    assert len(sent) > 500
    # most requests went by send_now; each connection outlived its session twice
    assert calls["produce", 0] > len(sent) // 2, calls.calls
    assert calls["fetch", 1] > 20, calls.calls
    assert REAUTH_TEST_SESSION_MS == 3000
    assert reauths.by_purpose["produce"] >= 2 and reauths.by_purpose["fetch"] >= 2, reauths


async def test_an_unanswered_send_now_request_is_retried_with_its_sequence(
    kafka: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Produce answers swallowed (the broker writes the records): the requests written
    by send_now time out, the connection dies, and each batch is sent again with the
    same producer id, epoch and sequence: the broker takes the copies as duplicates,
    so every record is in the log once, in order, at the offset its handle says, and
    no OutOfOrderSequence is met."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    calls = SendNowCalls(monkeypatch)
    async with FaultProxy(kafka.bootstrap_servers) as proxy:
        async with Producer(
            bootstrap_servers=proxy.bootstrap_servers,
            linger_ms=0,
            request_timeout_ms=800,
            delivery_timeout_ms=30_000,
            **FAST,
        ) as p:
            sent: list[bytes] = []

            async def send(count: int) -> list[Any]:
                handles = []
                for _ in range(count):
                    value = b"%05d" % len(sent)
                    sent.append(value)
                    handles.append(await p.send(topic_name, value))
                    await asyncio.sleep(0.002)  # several requests, pipelined
                return handles

            handles = await send(50)
            await asyncio.wait_for(asyncio.gather(*handles), 10)
            conn = produce_conn(p)
            lst = proxy.listeners[0]
            lst.blackhole("response", apis=[PRODUCE])
            before = calls["produce", 0]
            handles += await send(100)
            assert calls["produce", 0] > before  # written by send_now into the hole
            async with asyncio.timeout(10):
                while conn.connected:  # noqa: ASYNC110 (its requests' timeout kills it: no event)
                    await asyncio.sleep(0.05)
            assert lst.stats.swallowed["response"] > 0
            await lst.heal()
            handles += await send(50)
            metas = await asyncio.wait_for(asyncio.gather(*handles), 30)
        proxy.check()
    assert [m.offset for m in metas] == list(range(len(sent)))
    log = await read_log(kafka.bootstrap_servers, topic_name, 1)
    assert [r.value for r in log] == sent
    assert "OutOfOrderSequence" not in caplog.text and "DuplicateSequence" not in caplog.text


@pytest.mark.parametrize("answers", ["held", "flowing"])
async def test_stop_with_send_now_requests_in_flight_resolves_every_handle(
    kafka: Any, topic_name: str, answers: str
) -> None:
    """stop() while requests written by send_now are out: with their answers held past
    the stop timeout every handle fails with KafkaTimeoutError, with answers flowing
    every handle succeeds; none is left pending, nothing is logged as unhandled, and a
    late answer changes nothing."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    try:
        # small batches: requests out (five) and more queued behind them
        p = Producer(
            bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, batch_size=256, **FAST
        )
        await p.start()
        await (await p.send(topic_name, b"warm-up"))
        conn = produce_conn(p)
        if answers == "held":
            conn._transport.pause_reading()  # type: ignore[union-attr]
        handles = [await p.send(topic_name, b"%03d" % i) for i in range(200)]
        sender = p._sender
        assert sender is not None
        async with asyncio.timeout(5):
            while not sender._answers:  # noqa: ASYNC110 (the drain loop writes them)
                await asyncio.sleep(0)
        began = loop.time()
        await asyncio.wait_for(p.stop(timeout_ms=300), 5)
        assert loop.time() - began < 2
        assert all(h.done() for h in handles)
        if answers == "held":
            errors = {type(h.exception()) for h in handles}
            assert errors == {KafkaTimeoutError}, errors
        else:
            metas = [h.result() for h in handles]
            assert [m.offset for m in metas] == list(range(1, 201))
        assert not sender._answers and sender.requests_in_flight == 0
        await asyncio.sleep(0.1)
    finally:
        loop.set_exception_handler(None)
    assert not unhandled, unhandled


async def test_cancelling_a_send_and_wait_mid_flight_leaves_the_record_and_the_rest(
    kafka: Any, topic_name: str
) -> None:
    """The task awaiting send_and_wait() is cancelled while its request (written by
    send_now) is out: the task ends cancelled, the record is still delivered once, and
    the other records of the same request are not disturbed."""
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, **FAST) as p:
        await (await p.send(topic_name, b"warm-up"))
        conn = produce_conn(p)
        conn._transport.pause_reading()  # type: ignore[union-attr]
        waiting = asyncio.create_task(p.send_and_wait(topic_name, b"cancelled"))
        others = [asyncio.create_task(p.send_and_wait(topic_name, b"other")) for _ in range(3)]
        async with asyncio.timeout(5):
            while not (p._sender is not None and p._sender._answers):  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        conn._transport.resume_reading()  # type: ignore[union-attr]
        metas = await asyncio.wait_for(asyncio.gather(*others), 10)
        assert [m.offset for m in metas] == [2, 3, 4]
        after = await p.send_and_wait(topic_name, b"after")
        assert after.offset == 5
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        values: list[bytes | None] = []
        async with asyncio.timeout(10):
            while len(values) < 6:
                for records in (await c.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
    assert values == [b"warm-up", b"cancelled", b"other", b"other", b"other", b"after"]
