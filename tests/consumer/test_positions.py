"""Positions against a real broker: seeks, resets, offsets look-ups, pause/resume."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokproto.admin import Admin
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.consumer.errors import NoGroupError, NoOffsetForPartitionError
from aiokproto.errors import IllegalStateError, KafkaConfigError
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import BASE_TS, aproduce, create_topic


def values(n: int, start: int = 0, partition: int = 0) -> list[Any]:
    return [(partition, None, f"v{i}".encode(), None) for i in range(start, start + n)]


async def take(consumer: Consumer, n: int, *tps: TopicPartition) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + 30
    while len(out) < n:
        assert time.monotonic() < deadline, (
            f"only {len(out)} of {n}; the fetcher's state:\n{consumer._fetcher.describe()}"
        )
        for recs in (
            await consumer.getmany(*tps, timeout_ms=300, max_records=n - len(out))
        ).values():
            out.extend(recs)
    return out


def consumer_for(kafka: Any, **options: Any) -> Consumer:
    return Consumer(bootstrap_servers=kafka.bootstrap_servers, **options)


async def test_seek_position_and_log_offsets(kafka: Any, topic_name: str) -> None:
    await aproduce(kafka.bootstrap_servers, topic_name, values(30))
    tp = TopicPartition(topic_name, 0)
    async with consumer_for(kafka) as consumer:
        consumer.assign([tp])
        # default auto_offset_reset is latest
        assert await consumer.position(tp) == 30
        assert await consumer.getmany(timeout_ms=200) == {}
        consumer.seek(tp, 10)
        assert await consumer.position(tp) == 10
        got = await take(consumer, 5)
        assert [r.offset for r in got] == [10, 11, 12, 13, 14]
        await consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        assert (await take(consumer, 1))[0].value == b"v0"
        await consumer.seek_to_end()
        assert await consumer.position(tp) == 30
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 30}
        times = await consumer.offsets_for_times({tp: BASE_TS + 17})
        assert times[tp] is not None and times[tp].offset == 17
        assert times[tp].timestamp == BASE_TS + 17
        assert (await consumer.offsets_for_times({tp: BASE_TS + 10_000}))[tp] is None
        assert consumer.partitions_for_topic(topic_name) == {0}
        assert topic_name in await consumer.topics()
        await aproduce(kafka.bootstrap_servers, topic_name, values(3, start=30))
        got = await take(consumer, 3)
        assert [r.offset for r in got] == [30, 31, 32]


async def test_misuse_raises_clear_errors(kafka: Any, topic_name: str) -> None:
    tp = TopicPartition(topic_name, 0)
    consumer = consumer_for(kafka)
    with pytest.raises(IllegalStateError, match="start"):
        await consumer.getmany()
    async with consumer:
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.seek(tp, 0)
        consumer.assign([tp])
        with pytest.raises(KafkaConfigError):
            consumer.seek(tp, -5)
        with pytest.raises(NoGroupError, match="group_id"):
            await consumer.commit()
        with pytest.raises(NoGroupError, match="group_id"):
            await consumer.committed(tp)
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            consumer.subscribe([topic_name])
        with pytest.raises(KafkaConfigError):
            await consumer.getmany(max_records=0)
    with pytest.raises(KafkaConfigError, match="auto_offset_reset"):
        Consumer(bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="smallest")
    with pytest.raises(KafkaConfigError, match="unknown option"):
        Consumer(bootstrap_servers=kafka.bootstrap_servers, fetch_max_wait=1)


async def test_auto_offset_reset_none_raises(kafka: Any, topic_name: str) -> None:
    await aproduce(kafka.bootstrap_servers, topic_name, values(5))
    tp = TopicPartition(topic_name, 0)
    async with consumer_for(kafka, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match="auto_offset_reset") as info:
            await consumer.getmany(timeout_ms=100)
        assert info.value.partitions == {tp}
        consumer.seek(tp, 3)
        assert [r.offset for r in await take(consumer, 2)] == [3, 4]
        consumer.seek(tp, 1000)  # beyond the end: out of range
        with pytest.raises(NoOffsetForPartitionError, match="out of range"):
            async with asyncio.timeout(30):
                while True:
                    await consumer.getmany(timeout_ms=200)
        consumer.seek(tp, 0)
        assert (await take(consumer, 1))[0].offset == 0


@pytest.mark.parametrize("reset", ["earliest", "latest"])
async def test_out_of_range_after_delete_records_resets(
    kafka: Any, topic_name: str, reset: str
) -> None:
    await aproduce(kafka.bootstrap_servers, topic_name, values(20))
    tp = TopicPartition(topic_name, 0)
    async with consumer_for(kafka, auto_offset_reset=reset) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 2)
        assert (await take(consumer, 1))[0].offset == 2
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            await admin.delete_records({tp: 10})
        consumer.seek(tp, 5)  # now below the log start offset
        if reset == "earliest":
            assert [r.offset for r in await take(consumer, 3)] == [10, 11, 12]
        else:
            deadline = time.monotonic() + 30
            while await consumer.position(tp) != 20:
                assert time.monotonic() < deadline, consumer._fetcher.describe()
                await consumer.getmany(timeout_ms=100)
            await aproduce(kafka.bootstrap_servers, topic_name, values(1, start=20))
            assert [r.offset for r in await take(consumer, 1)] == [20]


async def test_empty_partition_getmany_returns_quickly(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    async with consumer_for(kafka, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        assert await consumer.getmany(timeout_ms=0) == {}
        start = time.monotonic()
        assert await consumer.getmany(timeout_ms=300) == {}
        assert time.monotonic() - start < 2
        assert await consumer.position(TopicPartition(topic_name, 1)) == 0


async def test_pause_resume(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    await aproduce(
        kafka.bootstrap_servers, topic_name, values(10, partition=0) + values(10, partition=1)
    )
    p0, p1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with consumer_for(kafka, auto_offset_reset="earliest") as consumer:
        consumer.assign([p0, p1])
        consumer.pause(p1)
        assert consumer.paused() == {p1}
        got = await take(consumer, 10)
        assert {(r.partition) for r in got} == {0}
        assert await consumer.getmany(timeout_ms=300) == {}
        consumer.resume(p1)
        got = await take(consumer, 10)
        assert {(r.partition) for r in got} == {1}
        # getmany(partitions) only hands out those
        consumer.seek(p0, 0)
        consumer.seek(p1, 5)
        got = await take(consumer, 5, p1)
        assert [r.offset for r in got] == [5, 6, 7, 8, 9] and {r.partition for r in got} == {1}


async def test_subscribe_without_group_takes_all_partitions(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=3)
    await aproduce(
        kafka.bootstrap_servers,
        topic_name,
        values(4, partition=0) + values(4, partition=1) + values(4, partition=2),
    )
    async with Consumer(
        topic_name, bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as consumer:
        got = await take(consumer, 12)
        assert consumer.assignment() == {TopicPartition(topic_name, p) for p in range(3)}
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, o) for p in range(3) for o in range(4)
        ]


async def test_deserializers_and_bad_record(kafka: Any, topic_name: str) -> None:
    records = [
        (0, b"k", b"1", None),
        (0, b"k", b"2", None),
        (0, b"k", b"x", None),
        (0, None, b"4", None),
    ]
    await aproduce(kafka.bootstrap_servers, topic_name, records)
    tp = TopicPartition(topic_name, 0)
    async with consumer_for(
        kafka,
        auto_offset_reset="earliest",
        key_deserializer=lambda b: None if b is None else b.decode(),
        value_deserializer=lambda b: int(b),  # type: ignore[arg-type]
    ) as consumer:
        consumer.assign([tp])
        got = await take(consumer, 2)
        assert [(r.key, r.value) for r in got] == [("k", 1), ("k", 2)]
        from aiokproto.consumer.errors import RecordDeserializationError

        with pytest.raises(RecordDeserializationError) as info:
            async with asyncio.timeout(30):
                while True:
                    await consumer.getmany(timeout_ms=200)
        assert info.value.offset == 2
        assert await consumer.position(tp) == 2
        consumer.seek(tp, info.value.offset + 1)
        assert [(r.key, r.value) for r in await take(consumer, 1)] == [(None, 4)]
