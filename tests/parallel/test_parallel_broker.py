"""``ParallelConsumer`` against a real broker: per-key order under random latencies,
concurrency reaching ``max_concurrency``, nothing skipped or handled twice, commits
that never pass an unfinished record (on stop, on cancel, on a consumer stopped under
it, on revoke), two members rebalancing mid-run, the failure policies, and hostile
handlers (a BaseException, a CancelledError of their own, ``stop()`` from inside, a
``commit()`` in the user's rebalance listener)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from aiokproto import Consumer, ConsumerRebalanceListener, ParallelConsumer, Producer
from aiokproto.structs import ConsumerRecord, TopicPartition
from tests.consumer.conftest import create_topic, set_group_timeouts

Record = ConsumerRecord[bytes | None, bytes | None]


async def fill(kafka: Any, topic: str, partitions: int, count: int, keys: int) -> None:
    """``count`` records, key ``k<i % keys>``, value ``<i>``, on ``partitions``."""
    await create_topic(kafka.bootstrap_servers, topic, partitions=partitions)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as producer:
        for i in range(count):
            await producer.send(topic, value=b"%d" % i, key=b"k%d" % (i % keys))
        await producer.flush()


def member(kafka: Any, topic: str, group: str, **extra: Any) -> Consumer[Any, Any]:
    options: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 200,
        **extra,
    }
    if options.get("group_protocol") == "consumer":
        del options["session_timeout_ms"], options["heartbeat_interval_ms"]
    return Consumer(topic, **options)


async def committed(consumer: Consumer[Any, Any], topic: str, partitions: int) -> list[int]:
    out = []
    for p in range(partitions):
        got = await consumer.committed(TopicPartition(topic, p))
        out.append(-1 if got is None else got)
    return out


def group_id() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
async def test_order_concurrency_and_every_record_once(
    kafka: Any, topic_name: str, ordering: str
) -> None:
    count, keys, partitions, limit = 3_000, 100, 4, 50
    await fill(kafka, topic_name, partitions, count, keys)
    rnd = random.Random(36)
    seen: dict[tuple[int, bytes | None], list[int]] = defaultdict(list)
    handled: list[tuple[int, int]] = []
    running: dict[Any, int] = defaultdict(int)  # lane -> handlers running now
    now = peak = 0
    group = group_id()
    async with member(kafka, topic_name, group) as consumer:
        async with ParallelConsumer(consumer, ordering=ordering, max_concurrency=limit) as pc:  # type: ignore[arg-type]

            async def handle(record: Record) -> None:
                nonlocal now, peak
                lane = {"key": (record.partition, record.key), "partition": record.partition}
                lane_id = lane.get(ordering, (record.partition, record.offset))
                running[lane_id] += 1
                assert running[lane_id] == 1, f"two records of lane {lane_id} at once"
                now += 1
                peak = max(peak, now)
                seen[(record.partition, record.key)].append(record.offset)
                await asyncio.sleep(rnd.random() * 0.003)
                handled.append((record.partition, record.offset))
                now -= 1
                running[lane_id] -= 1
                if len(handled) == count:
                    await pc.stop()  # from inside a handler: returns at once

            started = time.monotonic()
            await asyncio.wait_for(pc.run(handle), 60)
            elapsed = time.monotonic() - started
        assert len(handled) == count and len(set(handled)) == count  # none twice, none skipped
        if ordering != "unordered":
            for offsets in seen.values():
                assert offsets == sorted(offsets)
        # partition ordering: one per partition; the others reach the limit
        assert peak == (partitions if ordering == "partition" else limit), peak
        assert pc.in_flight_max == peak
        # stop() committed every partition to its end
        tps = [TopicPartition(topic_name, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        assert await committed(consumer, topic_name, partitions) == [ends[tp] for tp in tps]
        metrics = consumer.metrics()
        assert metrics.value("processed-total", "parallel-consumer-metrics") == count
    print(f"{ordering}: {count} records in {elapsed:.2f}s, peak concurrency {peak}")


async def test_commit_never_passes_an_unfinished_record_on_cancel(
    kafka: Any, topic_name: str
) -> None:
    await fill(kafka, topic_name, 2, 400, 40)
    finished: set[tuple[int, int]] = set()
    cancelled = 0
    group = group_id()
    async with member(kafka, topic_name, group) as consumer:
        async with ParallelConsumer(consumer, ordering="key", max_concurrency=20) as pc:

            async def handle(record: Record) -> None:
                nonlocal cancelled
                try:
                    # every 7th record hangs: they stay unfinished until cancelled
                    await asyncio.sleep(3600 if record.offset % 7 == 3 else 0.001)
                except asyncio.CancelledError:
                    cancelled += 1
                    raise
                finished.add((record.partition, record.offset))

            task = asyncio.create_task(pc.run(handle))
            await asyncio.sleep(1.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert pc.in_flight == 0 and cancelled > 0
        # the consumer is left at the safe offsets: committing its positions (what a
        # user going on with it might do) commits nothing unfinished either
        await consumer.commit()
        done = await committed(consumer, topic_name, 2)
        tp0 = TopicPartition(topic_name, 0)
        assert (await consumer.getone(tp0)).offset == done[0]  # fetched again from there
    for p, offset in enumerate(done):
        assert offset >= 3  # records before the first hanging one were committed
        assert all((p, o) in finished for o in range(offset)), (p, offset)
        assert (p, offset) not in finished  # the commit stopped at an unfinished record


async def test_failure_policies(kafka: Any, topic_name: str) -> None:
    await fill(kafka, topic_name, 1, 30, 5)
    dlt = topic_name + ".DLT"
    await create_topic(kafka.bootstrap_servers, dlt, partitions=1)
    calls: dict[int, int] = defaultdict(int)
    tp = TopicPartition(topic_name, 0)

    async def flaky(record: Record) -> None:
        calls[record.offset] += 1
        if record.offset == 10:
            raise ValueError("bad record 10")
        if record.offset == 12 and calls[12] < 3:
            raise RuntimeError("flaky 12")  # succeeds on the third attempt

    # stop: run() raises the handler's exception; the commit stops at offset 10
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(consumer, ordering="partition", retries=1) as pc:
            with pytest.raises(ValueError, match="bad record 10") as info:
                await asyncio.wait_for(pc.run(flaky), 30)
        assert "on_failure='stop'" in "".join(info.value.__notes__)
        assert calls[10] == 2 and 11 not in calls  # partition order: nothing after it
        assert await consumer.committed(tp) == 10
    # skip, after two retries with back-off; then everything is committed
    calls.clear()
    ok: set[int] = set()
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(
            consumer, on_failure="skip", retries=2, retry_backoff_ms=1, commit_every_records=1
        ) as pc:

            async def until_done(record: Record) -> None:
                await flaky(record)
                ok.add(record.offset)
                if len(ok) == 29:  # all but 10 (a stop starts no record: not "at 29")
                    await pc.stop()

            await asyncio.wait_for(pc.run(until_done), 30)
        assert calls[10] == 3 and calls[12] == 3 and pc.skipped == 1 and pc.retried == 4
        assert await consumer.committed(tp) == 30
    # dead letter: the record goes to the DLT with headers saying why
    calls.clear()
    ok.clear()
    async with (
        Producer(bootstrap_servers=kafka.bootstrap_servers) as producer,
        member(kafka, topic_name, group_id()) as consumer,
    ):
        async with ParallelConsumer(
            consumer, on_failure="dead_letter", dead_letter_producer=producer
        ) as pc:

            async def until_done2(record: Record) -> None:
                await flaky(record)
                ok.add(record.offset)
                if len(ok) == 28:  # all but 10 and 12
                    await pc.stop()

            await asyncio.wait_for(pc.run(until_done2), 30)
        assert pc.dead_lettered == 2  # 10, and 12 (no retries)
    async with Consumer(
        dlt, bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as reader:
        got = [await asyncio.wait_for(reader.getone(), 10) for _ in range(2)]
    assert [r.value for r in got] == [b"10", b"12"]
    headers = dict(got[0].headers)
    assert headers["aiokproto.dlt.offset"] == b"10"
    assert headers["aiokproto.dlt.error"] == b"builtins.ValueError"
    assert headers["aiokproto.dlt.message"] == b"bad record 10"


class Fatal(BaseException):
    pass


async def test_hostile_handlers(kafka: Any, topic_name: str) -> None:
    await fill(kafka, topic_name, 1, 20, 20)
    tp = TopicPartition(topic_name, 0)
    # a CancelledError of the handler's own (nobody cancelled it) is a failure like
    # any other: skipped here; a BaseException stops run() and is raised from it
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(consumer, on_failure="skip", max_concurrency=1) as pc:

            async def hostile(record: Record) -> None:
                if record.offset == 2:
                    raise asyncio.CancelledError
                if record.offset == 5:
                    raise Fatal("out")

            with pytest.raises(Fatal):
                await asyncio.wait_for(pc.run(hostile), 30)
        assert pc.skipped == 1 and pc.in_flight == 0
        assert await consumer.committed(tp) == 5


class CommittingListener(ConsumerRebalanceListener):
    """A user's listener that commits positions (no offsets) when partitions go."""

    def __init__(self) -> None:
        self.consumer: Consumer[Any, Any] | None = None
        self.revoked: list[frozenset[TopicPartition]] = []

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.revoked.append(revoked)
        assert self.consumer is not None
        await self.consumer.commit()


async def test_consumer_stopped_under_it(kafka: Any, topic_name: str) -> None:
    await fill(kafka, topic_name, 2, 200, 20)
    finished: set[tuple[int, int]] = set()
    group = group_id()
    # the user's listener commits positions (no offsets) in on_partitions_revoked: the
    # ParallelConsumer moved the positions to the safe offsets first, so that is safe too
    listener = CommittingListener()
    consumer = member(kafka, topic_name, group)
    listener.consumer = consumer
    consumer.subscribe([topic_name], listener=listener)
    async with consumer:
        async with ParallelConsumer(consumer, max_concurrency=10, revoke_timeout_ms=300) as pc:

            async def handle(record: Record) -> None:
                await asyncio.sleep(3600 if record.offset == 50 else 0.002)
                finished.add((record.partition, record.offset))

            task = asyncio.create_task(pc.run(handle))
            await asyncio.sleep(1.0)
            await consumer.stop()  # its revoke listener commits the safe offsets
            await asyncio.wait_for(task, 10)  # run() returns: the consumer stopped
            assert pc.in_flight == 0
    assert listener.revoked
    async with member(kafka, topic_name, group) as again:
        done = await committed(again, topic_name, 2)
    for p, offset in enumerate(done):
        assert offset == 50  # the hanging record holds each partition's commit
        assert all((p, o) in finished for o in range(offset))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_two_members_rebalance_mid_run(kafka: Any, topic_name: str, protocol: str) -> None:
    partitions, count = 4, 2_000
    await fill(kafka, topic_name, partitions, count, 200)
    group = group_id()
    if (
        protocol == "consumer"
    ):  # heartbeats every 500 ms (the floor the harness sets): the revoke is seen soon
        await set_group_timeouts(kafka.bootstrap_servers, group, session_ms=6_000, heartbeat_ms=500)
    # partition -> member -> its handlers running on that partition now
    active: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    handled: dict[str, list[tuple[int, int]]] = defaultdict(list)
    done = asyncio.Event()
    warmed_up = asyncio.Event()
    listener = CommittingListener()

    async def run_member(name: str, *, user_listener: bool) -> None:
        consumer = member(kafka, topic_name, group, group_protocol=protocol)
        if user_listener:
            listener.consumer = consumer
            consumer.subscribe([topic_name], listener=listener)
        async with consumer, ParallelConsumer(consumer, max_concurrency=10) as pc:

            async def handle(record: Record) -> None:
                here = active[record.partition]
                here[name] += 1
                others = {n: c for n, c in here.items() if n != name and c}
                assert not others, f"partition {record.partition}: {name} and {others} at once"
                try:
                    await asyncio.sleep(0.02)  # slow enough for b to join mid-run
                finally:
                    here[name] -= 1
                handled[name].append((record.partition, record.offset))
                if len(handled["a"]) >= 300:
                    warmed_up.set()
                if len({r for recs in handled.values() for r in recs}) >= count:
                    done.set()

            run = asyncio.create_task(pc.run(handle))
            await done.wait()
            await pc.stop()
            await run

    first = asyncio.create_task(run_member("a", user_listener=True))
    await asyncio.wait_for(warmed_up.wait(), 30)
    second = asyncio.create_task(run_member("b", user_listener=False))
    await asyncio.wait_for(asyncio.gather(first, second), 60)
    everything = [rec for recs in handled.values() for rec in recs]
    assert len(set(everything)) == count  # nothing skipped
    assert handled["b"]  # the second member got partitions mid-run
    assert listener.revoked  # the user's listener ran (chained, not replaced)
    print(
        f"{protocol}: a={len(handled['a'])} b={len(handled['b'])} "
        f"redelivered={len(everything) - len(set(everything))}"
    )
