"""Hostile use of the Producer against scripted fake brokers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokproto.errors import IllegalStateError, KafkaError
from aiokproto.producer import Producer
from tests.hostile.fake_cluster import FAST, TOPIC, FakeCluster


async def test_a_second_concurrent_stop_waits_for_the_first() -> None:
    """Expected: stop() returns once the producer is stopped: every record it held is
    delivered or failed, the sender and the connections are closed, whoever else
    called stop() too. Observed: a second stop() returns at once (the first cleared
    _running), while the first is still delivering: the record's fate is not known yet
    and the client is still open when the caller goes on (e.g. `async with` exits
    and the loop is closed under the first stop)."""

    async def slow(node: int, part: int, batch: Any) -> None:
        await asyncio.sleep(1.0)  # a slow broker: the answer takes a second

    async with FakeCluster(nodes=1, hook=slow) as fake:
        p = Producer(bootstrap_servers=fake.bootstrap, linger_ms=0, **FAST)
        await p.start()
        handle = await p.send(TOPIC, b"x")
        async with asyncio.timeout(10):
            first = asyncio.ensure_future(p.stop())
            await asyncio.sleep(0.1)
            await p.stop()
            done_when_second_returned = handle.done()
            await first
        assert (await handle).offset == 0
        assert done_when_second_returned, "the second stop() returned with a record in limbo"


async def test_stop_wakes_a_send_waiting_for_an_unknown_partition() -> None:
    """Expected (DESIGN: "stop() wakes such waiters at once"): a send() waiting for
    metadata because its partition is not known yet fails with IllegalStateError as
    soon as stop() is called. Observed: send(partition=N) waits in
    _partition_queue() for metadata.refresh(), which stop() does not interrupt
    (interrupt_waiters() only wakes wait_for()); it is released only when the slow
    refresh answers, or when stop() finally closes the client."""
    calls = 0

    def delay() -> float:
        nonlocal calls
        calls += 1
        return 0.0 if calls <= 2 else 4.0  # later refreshes are slow

    async def silent(node: int, part: int, batch: Any) -> str:
        return "silent"  # stop() waits for this record's delivery

    async with FakeCluster(nodes=1, partitions=1, hook=silent, metadata_delay=delay) as fake:
        p = Producer(bootstrap_servers=fake.bootstrap, linger_ms=0, **FAST)
        await p.start()
        await p.partitions_for(TOPIC)  # known: the sends below do not wait in a queue
        await p.send(TOPIC, b"pending")  # keeps stop() busy delivering
        waiting = asyncio.ensure_future(p.send(TOPIC, b"late", partition=3))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        stopping = asyncio.ensure_future(p.stop(timeout_ms=3000))
        began = time.monotonic()
        async with asyncio.timeout(15):
            with pytest.raises(IllegalStateError):
                await waiting
            took = time.monotonic() - began
            await stopping
        assert took < 1.0, f"send() was released {took:.1f} s after stop()"


class KeyedLoad:
    """Tasks that each send one key's numbered records in order while a mover task
    keeps moving partition leaders between brokers 1 and 2."""

    def __init__(self, fake: FakeCluster, rng: Any, partitions: int, every_s: float) -> None:
        self.fake, self.rng, self.partitions, self.every_s = fake, rng, partitions, every_s
        self.stop = asyncio.Event()
        self.acked: dict[bytes, list[int]] = {}

    async def mover(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(self.every_s)
            part = self.rng.randrange(self.partitions)
            self.fake.move(part, 2 if self.fake.leader[part] == 1 else 1)

    async def sender(self, p: Producer, key: bytes, n: int, pause_every: int) -> None:
        handles = []
        for i in range(n):
            handles.append((i, await p.send(TOPIC, b"%s:%05d" % (key, i), key=key)))
            if i % pause_every == 0:
                await asyncio.sleep(0.01)
        for i, h in handles:
            try:
                await h
                self.acked.setdefault(key, []).append(i)
            except KafkaError:
                pass

    def check(self, written: list[bytes], what: str) -> None:
        """Each key's records written once, in send order, every acknowledged one too."""
        by_key: dict[bytes, list[int]] = {}
        for value in written:
            key, _, i = value.partition(b":")
            by_key.setdefault(key, []).append(int(i))
        for key, seen in by_key.items():
            assert len(seen) == len(set(seen)), f"{key!r}: written twice: {seen[:60]}"
            assert seen == sorted(seen), f"{key!r}: reordered {what}: {seen[:60]}"
        for key, ok in self.acked.items():
            missing = set(ok) - set(by_key.get(key, []))
            assert not missing, f"{key!r}: acknowledged but not written: {sorted(missing)[:10]}"


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_many_senders_while_leaders_keep_moving_keep_order_and_lose_nothing(
    seed: int,
) -> None:
    """Expected: with idempotence, every acknowledged record is in its partition's log
    exactly once, and each key's records (sent in order by one task) are in order,
    while leaders move between two brokers every 150 ms and the old leader answers
    late. (Replicated producer state, as on a real cluster.)"""
    import random

    rng = random.Random(seed)

    async def jitter(node: int, part: int, batch: Any) -> None:
        await asyncio.sleep(rng.uniform(0, 0.04))

    async with FakeCluster(nodes=2, partitions=4, hook=jitter, replicated=True) as fake:
        load = KeyedLoad(fake, rng, partitions=4, every_s=0.15)
        moving = asyncio.ensure_future(load.mover())
        try:
            async with (
                Producer(
                    bootstrap_servers=fake.bootstrap, linger_ms=2, batch_size=300, **FAST
                ) as p,
                asyncio.timeout(60),
            ):
                await asyncio.gather(*(load.sender(p, b"k%d" % k, 150, 10) for k in range(8)))
        finally:
            load.stop.set()
            await moving
    load.check([v for log in fake.logs.values() for v in log.records], "in the log")
    assert sum(len(v) for v in load.acked.values()) == 8 * 150


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
async def test_wire_order_holds_with_unreplicated_leaders_drops_and_slow_old_leaders(
    seed: int,
) -> None:
    """Expected: the order in which a partition's records are written, over all
    brokers, is each key's send order, with no duplicates: a new leader (which knows
    nothing of the producer) must never receive a batch while an earlier one is still
    out at the old leader. Old leaders hold requests up to 300 ms; some connections
    hang (nothing more processed or answered on them: request timeout)."""
    import random

    rng = random.Random(seed)

    async def hostile(node: int, part: int, batch: Any) -> Any:
        if fake.leader[part] != node:
            await asyncio.sleep(rng.uniform(0, 0.3))
            return 6  # NOT_LEADER, late
        await asyncio.sleep(rng.uniform(0, 0.02))
        return None

    fake = FakeCluster(nodes=2, partitions=3, hook=hostile, stall=lambda node: rng.random() < 0.02)
    async with fake:
        load = KeyedLoad(fake, rng, partitions=3, every_s=0.2)
        moving = asyncio.ensure_future(load.mover())
        options = {**FAST, "request_timeout_ms": 400}
        try:
            async with (
                Producer(
                    bootstrap_servers=fake.bootstrap, linger_ms=2, batch_size=250, **options
                ) as p,
                asyncio.timeout(90),
            ):
                await asyncio.gather(*(load.sender(p, b"k%d" % k, 120, 8) for k in range(6)))
        finally:
            load.stop.set()
            await moving
    load.check([value for _part, value in fake.writes], "on the wire")


async def test_a_large_send_batch_is_not_starved_by_small_sends() -> None:
    """Expected: a send_batch() that needs most of buffer_memory gets in (FIFO, as
    Java's BufferPool serves waiters in order, accumulating freed memory for the
    first one) while other tasks keep sending small records, within max_block_ms: the
    brokers keep up (every Produce is answered in 20 ms). Observed: every release
    wakes all waiters and the small sends, which fit at once, take the freed space
    first; the big call never sees enough free space and fails with
    KafkaTimeoutError after max_block_ms."""

    async def steady(node: int, part: int, batch: Any) -> None:
        await asyncio.sleep(0.02)

    async with FakeCluster(nodes=1, partitions=1, hook=steady) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap,
            linger_ms=0,
            batch_size=4096,
            buffer_memory=64 * 1024,
            max_block_ms=3000,
            **FAST,
        ) as p:
            stop = asyncio.Event()

            async def small() -> None:
                while not stop.is_set():
                    await p.send(TOPIC, b"s" * 1000)

            smalls = [asyncio.ensure_future(small()) for _ in range(4)]
            try:
                await asyncio.sleep(0.3)  # the buffer is full of small records
                async with asyncio.timeout(10):
                    big = await p.send_batch(TOPIC, [b"B" * 1000] * 40)  # ~40 KiB of 64
                    await big
            finally:
                stop.set()
                await asyncio.gather(*smalls, return_exceptions=True)


async def test_cancelling_send_and_send_batch_at_every_await_buffers_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Holds: a send()/send_batch() cancelled while it yields to the sender, waits for
    metadata or for buffer space has buffered nothing (buffer accounting unchanged),
    and nothing logs an unretrieved exception afterwards."""
    import gc
    import logging

    async def silent(node: int, part: int, batch: Any) -> str:
        return "silent"

    async with FakeCluster(nodes=1, partitions=2, hook=silent) as fake:
        p = Producer(
            bootstrap_servers=fake.bootstrap,
            linger_ms=0,
            batch_size=1024,
            buffer_memory=8 * 1024,
            max_block_ms=5000,
            **FAST,
        )
        await p.start()
        acc = p._acc
        try:
            await p.partitions_for(TOPIC)  # known: records are buffered at once
            # fill the buffer: later calls wait for space
            while acc.used + 1100 < acc.limit:
                await p.send(TOPIC, b"x" * 1000, partition=0)
            calls = [
                lambda: p.send(TOPIC, b"y" * 1000, partition=1),
                lambda: p.send_batch(TOPIC, [b"z" * 500] * 3, partition=1),
                lambda: p.send(TOPIC, b"w", partition=7),  # unknown partition: metadata
                # unknown topic: its record waits for space before its topic's queue
                lambda: p.send("other-topic", b"v" * 1000),
            ]
            for make in calls:
                for delay in (0, 0.001, 0.05):
                    used, batches = acc.used, len(acc.incomplete)
                    task = asyncio.ensure_future(make())
                    await asyncio.sleep(delay)
                    task.cancel()
                    with pytest.raises((asyncio.CancelledError, KafkaError)):
                        await task
                    assert (acc.used, len(acc.incomplete)) == (used, batches)
        finally:
            with caplog.at_level(logging.ERROR, logger="asyncio"):
                await p.stop(timeout_ms=100)
                gc.collect()
                await asyncio.sleep(0.05)
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_leadership_arriving_mid_pipeline_cannot_reorder_a_new_partition() -> None:
    """Expected: a partition's records are written in send order even when its leader
    answers NOT_LEADER to the first requests and then, with later requests of the same
    pipeline already on the wire, becomes leader. A leader with no state for the
    producer accepts any first sequence, so while nothing of the partition has been
    acknowledged only one batch may be out. Observed before: batches 3..5 written
    first, then batch 1's retry refused as out of order (a transactional producer
    failed its transaction; an idempotent one renumbered after them: reordered)."""
    refused = 0

    async def leadership_arrives(node: int, part: int, batch: Any) -> Any:
        nonlocal refused
        if refused < 2:
            refused += 1
            return 6  # NOT_LEADER_OR_FOLLOWER: the broker is not leader yet
        return None

    async with FakeCluster(nodes=1, hook=leadership_arrives) as fake:
        async with Producer(
            bootstrap_servers=fake.bootstrap, linger_ms=0, batch_size=120, **FAST
        ) as p:
            handles = [await p.send(TOPIC, b"%03d" % i, partition=0) for i in range(60)]
            async with asyncio.timeout(20):
                for h in handles:
                    await h
    assert refused == 2
    written = [value for _part, value in fake.writes]
    assert written == [b"%03d" % i for i in range(60)]
