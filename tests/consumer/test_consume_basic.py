"""Consuming from a real broker without a group: manual assignment and subscriptions."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.errors import IllegalStateError
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import BASE_TS, aproduce, create_topic


def rec(i: int) -> tuple[int, bytes | None, bytes, list[tuple[str, bytes]] | None]:
    key = None if i % 5 == 0 else f"k{i}".encode()
    headers = [("n", str(i).encode()), ("e", b"")] if i % 3 == 0 else None
    return 0, key, f"value-{i}".encode() * (1 + i % 4), headers


async def consume_n(consumer: Consumer, n: int, seconds: float = 30) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + seconds
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} records"
        got = await consumer.getmany(timeout_ms=500)
        for recs in got.values():
            out.extend(recs)
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_manual_assign_reads_what_librdkafka_wrote(
    kafka: Any, topic_name: str, codec: str
) -> None:
    n = 400
    await aproduce(kafka.bootstrap_servers, topic_name, [rec(i) for i in range(n)], codec=codec)
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        got = await consume_n(consumer, n)
        assert await consumer.position(tp) == n
        assert consumer.highwater(tp) == n
    assert [r.offset for r in got] == list(range(n))
    for i, r in enumerate(got):
        _, key, value, headers = rec(i)
        assert (r.topic, r.partition) == (topic_name, 0)
        assert r.key == key and r.value == value
        assert r.headers == tuple(headers or ())
        assert r.timestamp == BASE_TS + i and r.timestamp_type == 0
        assert r.leader_epoch >= 0


async def test_async_for_and_getone(kafka_any: Any, topic_name: str) -> None:
    kafka = kafka_any
    n = 50
    await aproduce(kafka.bootstrap_servers, topic_name, [rec(i) for i in range(n)])
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        max_poll_records=7,
    ) as consumer:
        consumer.assign([tp])
        first = await asyncio.wait_for(consumer.getone(), 30)
        assert first.offset == 0
        seen = [first.offset]
        async with asyncio.timeout(30):
            async for record in consumer:
                seen.append(record.offset)
                if record.offset == 20:
                    # the position counts only what iteration handed out
                    assert await consumer.position(tp) == 21
                if len(seen) == n:
                    break
        assert seen == list(range(n))
        assert await consumer.position(tp) == n


async def test_incremental_fetch_session_is_used(kafka_any: Any, topic_name: str) -> None:
    await create_topic(kafka_any.bootstrap_servers, topic_name, partitions=3)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    async with Consumer(
        bootstrap_servers=kafka_any.bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign(tps)
        for round_ in range(3):
            await aproduce(
                kafka_any.bootstrap_servers,
                topic_name,
                [(p, None, f"{round_}-{p}".encode(), None) for p in range(3)],
            )
            got = await consume_n(consumer, 3)
            assert sorted(r.value for r in got) == [f"{round_}-{p}".encode() for p in range(3)]
        (session,) = consumer._fetcher._sessions.values()
        assert session.session_id != 0 and session.epoch > 1
        assert {tp.partition for tp in session.known} <= {0, 1, 2}


async def test_pattern_subscription_without_group(kafka: Any, topic_name: str) -> None:
    other = topic_name + "-other"
    await aproduce(kafka.bootstrap_servers, topic_name, [(0, None, b"a", None)])
    await aproduce(kafka.bootstrap_servers, other, [(0, None, b"b", None)])
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as consumer:
        consumer.subscribe(pattern=re.escape(topic_name) + ".*")
        got = await consume_n(consumer, 2)
        assert sorted(r.value for r in got) == [b"a", b"b"]
        assert consumer.subscription() == {topic_name, other}
        await consumer.unsubscribe()
        assert consumer.assignment() == frozenset()
        assert await consumer.getmany(timeout_ms=100) == {}


def test_a_call_from_another_event_loop_is_refused_at_once(kafka: Any, topic_name: str) -> None:
    # asyncio.run(c.start()) then asyncio.run(c.getone()): the consumer's tasks died
    # with the first loop, and getone() waited forever for records they would fetch.
    c = Consumer(topic_name, bootstrap_servers=kafka.bootstrap_servers, group_id=topic_name)
    asyncio.run(c.start())

    async def in_a_new_loop(call: Any) -> None:
        with pytest.raises(IllegalStateError, match="started in another event loop"):
            await asyncio.wait_for(call(), 20)  # a generous bound: it used to hang

    asyncio.run(in_a_new_loop(c.getone))
    asyncio.run(in_a_new_loop(lambda: c.getmany(timeout_ms=1000)))
    asyncio.run(in_a_new_loop(c.commit))
    asyncio.run(in_a_new_loop(c.stop))
