"""Consumer paths aiokafka users rely on, written the way aiokafka code calls them."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.producer import Producer
from aiokproto.structs import OffsetAndMetadata, TopicPartition
from tests.consumer.conftest import create_topic


async def until(predicate: Callable[[], bool], limit_s: float = 10) -> None:
    async with asyncio.timeout(limit_s):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.05)


async def produce(kafka: Any, topic: str, n: int, partition: int = 0) -> None:
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        await p.send_batch(topic, [b"v%d" % i for i in range(n)], partition=partition)


@pytest.mark.parametrize("how", ["async for", "getmany", "getone"])
async def test_a_consumer_without_a_group_gets_every_subscribed_partition(
    kafka: Any, topic_name: str, how: str
) -> None:
    # aiokafka's simple_consumer example: a topic, no group_id, then iterate.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await produce(kafka, topic_name, 5, partition=0)
    await produce(kafka, topic_name, 5, partition=1)
    got: list[ConsumerRecord] = []
    async with Consumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
    ) as consumer:
        async with asyncio.timeout(20):
            if how == "async for":
                async for record in consumer:
                    got.append(record)
                    if len(got) == 10:
                        break
            elif how == "getmany":
                while len(got) < 10:
                    for recs in (await consumer.getmany(timeout_ms=10_000)).values():
                        got.extend(recs)
            else:
                while len(got) < 10:
                    got.append(await consumer.getone())
    assert sorted((r.partition, r.offset) for r in got) == [
        (p, o) for p in range(2) for o in range(5)
    ]


@pytest.mark.parametrize("how", ["async for", "getmany", "getone"])
async def test_a_pattern_without_a_group_picks_up_a_topic_created_later(
    kafka: Any, topic_name: str, how: str
) -> None:
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,  # how often the full topic list is looked at
    ) as consumer:
        consumer.subscribe(pattern=f"{topic_name}-.*")

        async def first() -> ConsumerRecord:
            if how == "getone":
                return await consumer.getone()
            if how == "getmany":
                while True:
                    for recs in (await consumer.getmany(timeout_ms=10_000)).values():
                        return recs[0]
            async for record in consumer:
                return record
            raise AssertionError("the iteration ended")

        waiting = asyncio.ensure_future(first())
        await asyncio.sleep(1.0)
        assert not waiting.done()
        late = f"{topic_name}-late"
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(late, num_partitions=1, replication_factor=1)])
        await produce(kafka, late, 1)
        async with asyncio.timeout(20):
            record = await waiting
    assert (record.topic, record.offset) == (late, 0)


async def test_unsubscribe_and_partitions_for_topic_work_without_await(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, group_id=f"g-{topic_name}"
    ) as consumer:
        unknown = consumer.partitions_for_topic(topic_name + "-nope")
        assert unknown is None
        await until(lambda: consumer.partitions_for_topic(topic_name) is not None)
        assert consumer.partitions_for_topic(topic_name) == {0, 1, 2}
        consumer.subscribe([topic_name])
        group = consumer.group_coordinator
        assert group is not None and await group.wait_for_assignment(20)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "coroutine was never awaited"
            consumer.unsubscribe()  # the aiokafka way: not awaited
        assert consumer.subscription() == frozenset()
        await until(lambda: not consumer.assignment())
        consumer.subscribe([topic_name])
        assert await group.wait_for_assignment(20)
        await consumer.unsubscribe()  # and the awaited way
        assert consumer.assignment() == frozenset()


async def test_commit_pairs_seek_to_committed_and_last_poll_timestamp(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    await produce(kafka, topic_name, 10)
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=f"g-{topic_name}",
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.assign([tp])
        assert consumer.last_poll_timestamp(tp) is None
        before = int(time.time() * 1000)
        async with asyncio.timeout(20):
            while consumer.highwater(tp) is None:
                await consumer.getmany(timeout_ms=200)
        stamp = consumer.last_poll_timestamp(tp)
        assert stamp is not None and before - 1 <= stamp <= int(time.time() * 1000) + 1
        await consumer.commit({tp: (4, "processed up to 3")})  # aiokafka's (offset, meta)
        assert await consumer.committed(tp) == 4
        got = await consumer.seek_to_committed()
        assert got == {tp: 4} and await consumer.position(tp) == 4
        group = consumer.group_coordinator
        assert group is not None
        (om,) = (await group.fetch_committed([tp])).values()
        assert isinstance(om, OffsetAndMetadata) and om.metadata == "processed up to 3"


async def test_getone_for_a_partition_the_group_has_not_assigned_yet_waits_for_it(
    kafka: Any, topic_name: str
) -> None:
    # aiokafka code calls getone(tp) right after start(), before the join finished:
    # the partition is waited for, not refused.
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await produce(kafka, topic_name, 3, partition=1)
    tp = TopicPartition(topic_name, 1)
    async with Consumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=f"{topic_name}-g",
        auto_offset_reset="earliest",
    ) as consumer:
        assert tp not in consumer.assignment()
        async with asyncio.timeout(30):
            first = await consumer.getone(tp)
            batch = await consumer.getmany(tp, timeout_ms=5000)
        assert (first.partition, first.offset) == (1, 0)
        assert [r.offset for r in batch[tp]] == [1, 2]


async def test_getone_for_a_partition_outside_a_manual_assignment_is_refused(
    kafka: Any, topic_name: str
) -> None:
    from aiokproto.errors import IllegalStateError

    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        with pytest.raises(IllegalStateError, match="not assigned"):
            await consumer.getone(TopicPartition(topic_name, 1))
        with pytest.raises(IllegalStateError, match="not assigned"):
            await consumer.getmany(TopicPartition(topic_name, 1), timeout_ms=100)
