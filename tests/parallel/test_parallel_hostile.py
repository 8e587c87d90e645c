"""``ParallelConsumer`` under a hostile user, against a real broker: the consumer's
position moved back under it (``seek()`` from a handler), a handler that will not
be cancelled."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from aiokproto import ParallelConsumer
from aiokproto.errors import KafkaConfigError
from aiokproto.structs import TopicPartition
from tests.parallel.test_parallel_broker import Record, committed, fill, group_id, member


async def test_seek_back_from_a_handler_replays_from_there(kafka: Any, topic_name: str) -> None:
    await fill(kafka, topic_name, 1, 200, 10)
    tp = TopicPartition(topic_name, 0)
    seen: dict[bytes | None, list[int]] = defaultdict(list)
    handled: list[int] = []
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(consumer, max_concurrency=5) as pc:
            sought = False

            async def handle(record: Record) -> None:
                nonlocal sought
                seen[record.key].append(record.offset)
                await asyncio.sleep(0.001)
                handled.append(record.offset)
                if record.offset == 100 and not sought:
                    sought = True
                    consumer.seek(tp, 20)  # replay from 20 (its records are fetched again)
                if handled.count(199) == 2:
                    await pc.stop()

            await asyncio.wait_for(pc.run(handle), 30)
        assert sought
        assert set(handled) == set(range(200))  # nothing skipped
        assert handled.count(50) == 2  # replayed
        assert await committed(consumer, topic_name, 1) == [200]


@pytest.mark.parametrize("reaction", ["raise", "swallow"])
async def test_a_handler_that_will_not_be_cancelled(
    kafka: Any, topic_name: str, reaction: str
) -> None:
    """revoke_timeout_ms cancels a hanging handler that turns its cancellation into an
    error of its own (retried, then skipped) or swallows it (returns): the record is
    not done all the same (no commit passes it), and the revoke goes on."""
    await fill(kafka, topic_name, 1, 100, 10)
    attempts: dict[int, int] = defaultdict(int)
    hanging = asyncio.Event()
    group = group_id()
    async with member(kafka, topic_name, group) as consumer:
        async with ParallelConsumer(
            consumer, on_failure="skip", retries=2, retry_backoff_ms=1, revoke_timeout_ms=300
        ) as pc:

            async def handle(record: Record) -> None:
                attempts[record.offset] += 1
                if record.offset == 50:
                    hanging.set()
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        if reaction == "raise":
                            raise RuntimeError("interrupted") from None

            task = asyncio.create_task(pc.run(handle))
            await asyncio.wait_for(hanging.wait(), 10)
            await asyncio.sleep(0.2)
            await asyncio.wait_for(consumer.stop(), 10)  # revoke: 50 is cancelled
            await asyncio.wait_for(task, 10)
        assert attempts[50] == 1 and pc.skipped == 0  # not retried after its cancellation
    async with member(kafka, topic_name, group) as again:
        assert await committed(again, topic_name, 1) == [50]


async def test_a_handler_that_is_not_async(kafka: Any, topic_name: str) -> None:
    """A plain function as handler (it returns None, not an awaitable) is a typed error
    from run() at its first record, not a failure to retry and skip: its body ran."""
    await fill(kafka, topic_name, 1, 20, 5)
    calls: list[int] = []

    def handle(record: Record) -> None:
        calls.append(record.offset)

    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(
            consumer, on_failure="skip", retries=2, retry_backoff_ms=1, max_concurrency=1
        ) as pc:
            with pytest.raises(KafkaConfigError, match="handler must return an awaitable"):
                await asyncio.wait_for(pc.run(handle), 10)  # type: ignore[arg-type]
        assert calls == [0] and pc.skipped == 0 and pc.retried == 0
        assert await committed(consumer, topic_name, 1) == [0]  # nothing past it


async def test_subscribe_again_mid_run_still_gives_partitions_back(
    kafka: Any, topic_name: str
) -> None:
    """``consumer.subscribe()`` from a handler replaces the consumer's listener; the
    revoke that follows at once still drops the old topic's queued records (none of
    them starts once its partition is gone) and commits what finished."""
    other = topic_name + "-b"
    await fill(kafka, topic_name, 1, 300, 30)
    await fill(kafka, other, 1, 10, 10)
    late: list[int] = []
    seen_other = asyncio.Event()
    group = group_id()
    async with member(kafka, topic_name, group) as consumer:
        async with ParallelConsumer(consumer, max_concurrency=2) as pc:

            async def handle(record: Record) -> None:
                if record.topic == other:
                    seen_other.set()
                    return
                tp = TopicPartition(record.topic, record.partition)
                if tp not in consumer.assignment():
                    late.append(record.offset)  # started after its partition went
                await asyncio.sleep(0.01)
                if record.offset == 10:
                    consumer.subscribe([other])

            task = asyncio.create_task(pc.run(handle))
            await asyncio.wait_for(seen_other.wait(), 20)
            await pc.stop()
            await task
        assert late == []
        got = await committed(consumer, topic_name, 1)
        assert 11 <= got[0] < 300  # what finished, no more


async def test_a_resume_of_the_users_does_not_lift_back_pressure(
    kafka: Any, topic_name: str
) -> None:
    """The user resumes a partition paused for back-pressure: its queue stays bounded
    (it is paused again), and a pause of the user's own is left alone."""
    await fill(kafka, topic_name, 2, 2_000, 50)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    release = asyncio.Event()
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(
            consumer, max_concurrency=2, max_queued_per_partition=40, max_queued_total=80
        ) as pc:

            async def handle(record: Record) -> None:
                await release.wait()

            task = asyncio.create_task(pc.run(handle))
            for _ in range(100):
                await asyncio.sleep(0.05)
                if tp0 in consumer.paused():
                    break
            consumer.resume(tp0)  # the user's: it fetches again
            consumer.pause(tp1)
            for _ in range(10):
                await asyncio.sleep(0.05)
                assert pc._sched.queued(tp0) <= 40 + 80  # its bound and one fetch
            assert tp1 in consumer.paused()
            release.set()
            await pc.stop()
            await task


async def test_resume_checks_stay_per_record_constant(kafka: Any, topic_name: str) -> None:
    """With many partitions paused for back-pressure, a record costs a few resume checks,
    not one per paused partition (that was 78 us a record with 200 paused)."""
    partitions, count = 40, 1_200
    await fill(kafka, topic_name, partitions, count, 400)
    done = asyncio.Event()
    handled = 0
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(
            consumer, max_concurrency=4, max_queued_per_partition=6, max_queued_total=60
        ) as pc:
            checks = 0
            under_limit = pc._sched.under_limit

            def counting(tp: TopicPartition) -> bool:
                nonlocal checks
                checks += 1
                return under_limit(tp)

            pc._sched.under_limit = counting  # type: ignore[method-assign]

            async def handle(record: Record) -> None:
                nonlocal handled
                await asyncio.sleep(0.001)
                handled += 1
                if handled == count:
                    done.set()

            task = asyncio.create_task(pc.run(handle))
            await asyncio.wait_for(done.wait(), 30)
            await pc.stop()
            await task
        assert checks / count < 3, (checks, count)  # 27 before


async def test_fetches_take_chunks_not_a_record_per_handler(kafka: Any, topic_name: str) -> None:
    """With the queues at their bound, each handler that starts frees one slot: the
    fetch loop waits for room for a chunk instead of fetching a record or two each time
    (1.7 records a fetch at max_concurrency 1,000 before, each fetch paying the
    per-batch costs)."""
    partitions, count = 4, 2_000
    await fill(kafka, topic_name, partitions, count, 500)
    sizes: list[int] = []
    handled = 0
    async with member(kafka, topic_name, group_id()) as consumer:
        getmany = consumer.getmany

        async def counting(*tps: TopicPartition, **kwargs: Any) -> Any:
            got = await getmany(*tps, **kwargs)
            if got:
                sizes.append(sum(map(len, got.values())))
            return got

        consumer.getmany = counting  # type: ignore[method-assign]
        async with ParallelConsumer(
            consumer, max_concurrency=100, max_queued_total=400, fetch_max_records=100
        ) as pc:

            async def handle(record: Record) -> None:
                nonlocal handled
                await asyncio.sleep(0.002)
                handled += 1
                if handled == count:
                    await pc.stop()

            await asyncio.wait_for(pc.run(handle), 60)
        assert sum(await committed(consumer, topic_name, partitions)) == count
    # chunks of up to 100 (fetch_max_records): well over a handful each on average
    assert sum(sizes) == count and len(sizes) <= count // 25, (len(sizes), sizes[:40])
