"""fetch_buffer_max_bytes against a real broker: a consumer behind on many partitions
holds at most the bound plus one answer's overshoot (a first batch larger than what
was asked for, and the answer's own headers), loses and repeats nothing, keeps each
partition's order, and still delivers a batch larger than the bound."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.errors import ConsumerStoppedError
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import aproduce, create_topic

PARTITIONS = 200
PER_PARTITION = 20
VALUE = 1000
BOUND = 256 * 1024
#: one answer may exceed what it asked for by its first batch (20 records of 1 KB
#: here) and its headers (a few dozen bytes per partition named)
SLACK = 64 * 1024


async def test_a_consumer_behind_on_200_partitions_holds_at_most_the_bound(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=PARTITIONS)
    records = [
        (p, None, f"{p}:{i}:".encode().ljust(VALUE, b"."), None)
        for i in range(PER_PARTITION)
        for p in range(PARTITIONS)
    ]
    await aproduce(kafka.bootstrap_servers, topic_name, records, **{"linger.ms": 50})
    got: dict[int, list[ConsumerRecord]] = {p: [] for p in range(PARTITIONS)}
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_buffer_max_bytes=BOUND,
    ) as consumer:
        consumer.assign([TopicPartition(topic_name, p) for p in range(PARTITIONS)])
        budget = consumer._fetcher.budget
        total = 0
        async with asyncio.timeout(60):
            while total < len(records):
                batch = await consumer.getmany(timeout_ms=500, max_records=100)
                for tp, recs in batch.items():
                    got[tp.partition].extend(recs)
                    total += len(recs)
                assert budget.buffered + budget.reserved <= BOUND + SLACK
                await asyncio.sleep(0.02)  # a reader slower than the fetches: it fills
        metrics = consumer.metrics()
        assert metrics.value("fetch-buffer-max-bytes") == BOUND
        assert 0 <= metrics.value("fetch-buffer-bytes") <= BOUND + SLACK
        peak = budget.peak
    assert BOUND // 2 < peak <= BOUND + SLACK  # the bound was reached, never passed
    for p, recs in got.items():  # nothing lost, nothing twice, each partition in order
        assert [r.offset for r in recs] == list(range(PER_PARTITION)), p
        assert [r.value[: r.value.index(b":", len(str(p)) + 1)] for r in recs] == [
            f"{p}:{i}".encode() for i in range(PER_PARTITION)
        ]


async def test_a_batch_larger_than_the_bound_is_delivered(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    records = [(0, None, b"x" * 200_000, None), (1, None, b"s", None), (0, None, b"y", None)]
    await aproduce(kafka.bootstrap_servers, topic_name, records, **{"linger.ms": 0})
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_buffer_max_bytes=1_000,
    ) as consumer:
        consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        got: list[ConsumerRecord] = []
        async with asyncio.timeout(30):
            while len(got) < 3:
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(recs)
        assert consumer._fetcher.budget.peak > 200_000  # one batch over the bound
    assert sorted((r.partition, r.offset, len(r.value)) for r in got) == [
        (0, 0, 200_000),
        (0, 1, 1),
        (1, 0, 1),
    ]


async def test_stop_ends_fetch_loops_waiting_at_the_bound(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=4)
    records = [(i % 4, None, b"v" * 5_000, None) for i in range(40)]
    await aproduce(kafka.bootstrap_servers, topic_name, records)
    consumer = Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_buffer_max_bytes=8_000,
    )
    await consumer.start()
    consumer.assign([TopicPartition(topic_name, p) for p in range(4)])
    for p in range(4):
        consumer.seek(TopicPartition(topic_name, p), 0)  # positions without a poll
    budget = consumer._fetcher.budget
    async with asyncio.timeout(30):
        while budget.free > 0:  # noqa: ASYNC110  # nothing handed out: it fills up
            await asyncio.sleep(0.05)
    full = budget.buffered
    tps = [TopicPartition(topic_name, p) for p in range(4)]
    consumer.pause(*tps)  # every partition paused at the bound: a reader just waits
    getter = asyncio.create_task(consumer.getmany(timeout_ms=60_000))
    await asyncio.sleep(0.3)
    assert not getter.done() and budget.buffered == full  # kept for resume()
    async with asyncio.timeout(10):  # a hang guard: stop() must not wait for room
        await consumer.stop()
        done = await asyncio.gather(getter, return_exceptions=True)
    assert isinstance(done[0], ConsumerStoppedError)
    assert budget.buffered == 0 and budget.reserved == 0


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_rebalance_at_the_bound_frees_the_revoked_partitions_bytes(
    kafka: Any, topic_name: str, protocol: str
) -> None:
    # a member behind on 8 partitions holds the bound; a second joins and takes some:
    # the first one's buffer then holds its own partitions' data only (the budget equals
    # it), both go on, and together they hand out every record
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=8)
    records = [(p, None, bytes(1000), None) for _ in range(40) for p in range(8)]
    await aproduce(kafka.bootstrap_servers, topic_name, records, **{"linger.ms": 20})
    options: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": topic_name,
        "group_protocol": protocol,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "fetch_buffer_max_bytes": 32 * 1024,
        "max_partition_fetch_bytes": 8 * 1024,
    }
    seen: set[tuple[int, int]] = set()

    async def take(consumer: Consumer, n: int) -> None:
        for tp, recs in (await consumer.getmany(timeout_ms=200, max_records=n)).items():
            seen.update((tp.partition, r.offset) for r in recs)

    async with Consumer(**options) as first:
        first.subscribe([topic_name])
        budget = first._fetcher.budget
        async with asyncio.timeout(30):
            while budget.buffered < 24 * 1024:
                await take(first, 1)
            async with Consumer(**options) as second:
                second.subscribe([topic_name])
                while len(first.assignment()) == 8 or not second.assignment():
                    await take(first, 1)
                    await take(second, 1)
                await take(first, 1)
                fetcher = first._fetcher
                mine = first.assignment()
                assert set(fetcher._buffer) <= mine
                frames = {id(fd.frame): fd.frame for q in fetcher._buffer.values() for fd in q}
                held = sum(fd.charged for q in fetcher._buffer.values() for fd in q)
                held += sum(f.charged for f in frames.values() if f is not None)
                assert budget.buffered == held
                while len(seen) < len(records):
                    await take(first, 100)
                    await take(second, 100)
    assert seen == {(p, i) for p in range(8) for i in range(40)}
