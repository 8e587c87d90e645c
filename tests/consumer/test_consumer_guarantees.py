"""The consumer at its edges: stop() with callers waiting, seeks, deleted topics."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokproto.consumer import Consumer, ConsumerRecord, ConsumerStoppedError
from aiokproto.errors import IllegalStateError
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import aproduce, create_topic


async def test_stop_releases_every_waiter_at_once(kafka: Any, topic_name: str) -> None:
    # An idle, manually assigned partition: every caller is waiting for records.
    await create_topic(kafka.bootstrap_servers, topic_name)
    consumer = Consumer(bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="latest")
    await consumer.start()
    consumer.assign([TopicPartition(topic_name, 0)])
    iterated: list[ConsumerRecord] = []

    async def iterate() -> str:
        async for record in consumer:
            iterated.append(record)
        return "ended"

    loop_task = asyncio.ensure_future(iterate())
    getone_task = asyncio.ensure_future(consumer.getone())
    getone_tp_task = asyncio.ensure_future(consumer.getone(TopicPartition(topic_name, 0)))
    getmany_task = asyncio.ensure_future(consumer.getmany(timeout_ms=60_000))
    await asyncio.sleep(0.5)
    assert not any(t.done() for t in (loop_task, getone_task, getone_tp_task, getmany_task))
    began = time.monotonic()
    stopping = asyncio.ensure_future(consumer.stop())
    async with asyncio.timeout(2):
        assert await loop_task == "ended"
        for task in (getone_task, getone_tp_task, getmany_task):
            with pytest.raises(ConsumerStoppedError):
                await task
    assert time.monotonic() - began < 0.5, "waiters were released late"
    await stopping
    assert iterated == []
    with pytest.raises(ConsumerStoppedError):
        await consumer.getone()
    with pytest.raises(ConsumerStoppedError):
        await consumer.getmany()
    async for _ in consumer:  # ends at once
        raise AssertionError("a stopped consumer yielded a record")


async def test_async_for_on_a_consumer_never_started_is_an_error(kafka: Any) -> None:
    consumer = Consumer(bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(IllegalStateError, match="start"):
        async for _ in consumer:
            pass


async def test_the_fetcher_idles_after_a_backed_off_partition_leaves(
    kafka: Any, topic_name: str
) -> None:
    # Consume a topic, delete it (its partition backs off on every fetch error), then
    # assign another: the fetcher must go quiet, not plan in a loop at 100% CPU.
    from aiokproto import Admin

    other = topic_name + "-other"
    await create_topic(kafka.bootstrap_servers, topic_name)
    await create_topic(kafka.bootstrap_servers, other)
    await aproduce(kafka.bootstrap_servers, topic_name, [(0, None, b"v", None)] * 3)
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        retry_backoff_ms=200,
    ) as consumer:
        consumer.assign([tp])
        got = 0
        async with asyncio.timeout(20):
            while got < 3:
                got += sum(len(r) for r in (await consumer.getmany(timeout_ms=200)).values())
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.delete_topics([topic_name])
        fetcher = consumer._fetcher
        async with asyncio.timeout(20):
            while tp not in fetcher._backoff_until:
                await consumer.getmany(timeout_ms=50)
        consumer.assign([TopicPartition(other, 0)])
        await consumer.getmany(timeout_ms=0)
        before = fetcher.planning_rounds
        await asyncio.sleep(1.5)
        assert fetcher.planning_rounds - before < 30, "the fetcher manager spins"


async def test_a_seek_drops_stale_data_and_fetches_from_the_new_position(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await aproduce(
        kafka.bootstrap_servers,
        topic_name,
        [(0, None, b"x" * 100, None)] * 3000,
        **{"batch.size": 2000},  # small batches: many answers per partition
    )
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=20_000,  # many small answers: a buffer to go stale
    ) as consumer:
        consumer.assign([tp])
        buffer = consumer._fetcher._buffer
        async with asyncio.timeout(20):
            # one record at a time until one buffered answer is left, partly consumed:
            # the fetcher then prefetches from its end
            while True:
                got = await consumer.getmany(tp, timeout_ms=1000, max_records=1)
                assert got, "no records"
                if len(buffer.get(tp, ())) == 1:
                    break
        consumer.seek(tp, 2000)
        before = consumer._fetcher.discarded
        await asyncio.sleep(1.5)  # no poll: the fetcher works on its own meanwhile
        assert consumer._fetcher.discarded - before <= 2, "stale data fetched again and again"
        record = await consumer.getone()
        assert record.offset == 2000


async def test_buffered_data_pins_at_most_four_times_its_size(
    kafka: Any, topic_name: str
) -> None:
    # Ten partitions answered in one response, then nine of them consumed and the tenth
    # paused: what stays buffered must not keep the whole response alive.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=10)
    await aproduce(
        kafka.bootstrap_servers, topic_name, [(i % 10, None, b"y" * 200, None) for i in range(2000)]
    )
    tps = [TopicPartition(topic_name, p) for p in range(10)]
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1 << 20,
    ) as consumer:
        consumer.assign(tps)
        buffer = consumer._fetcher._buffer
        async with asyncio.timeout(20):
            while len(buffer) < 10:
                # records of the first partition only: the tenth's must stay undecoded
                # (a batch is decoded whole on its first hand-out), or nothing unread
                # may be left to measure
                await consumer.getmany(tps[0], timeout_ms=100, max_records=1)
        consumer.pause(tps[9])
        for tp in tps[:9]:
            async with asyncio.timeout(20):
                while await consumer.position(tp) < 200:
                    await consumer.getmany(tp, timeout_ms=100, max_records=1000)
        consumer.pause(*tps[:9])
        pinned: dict[int, int] = {}
        unread = 0
        for queue in buffer.values():
            for fd in queue:
                pinned[id(fd._view.obj)] = len(fd._view.obj)
                unread += fd.unread_bytes
        assert unread > 0
        assert sum(pinned.values()) <= 4 * unread, "a small remainder pins a whole response"
