"""Hostile use of Consumer.stop(): concurrent stops, stop() from a rebalance listener,
callers caught between steps when stop() begins."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokproto.consumer import Consumer, ConsumerRebalanceListener, ConsumerStoppedError
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic


def member(kafka: Any, topic: str, group: str, **options: Any) -> Consumer:
    return Consumer(
        topic,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        default_api_timeout_ms=10_000,
        **options,
    )


async def fill(kafka: Any, topic: str, partitions: int, per_partition: int) -> None:
    await create_topic(kafka.bootstrap_servers, topic, partitions=partitions)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for part in range(partitions):
            await p.send_batch(topic, [b"v%d" % i for i in range(per_partition)], partition=part)


async def consume(consumer: Consumer, count: int) -> int:
    got = 0
    async with asyncio.timeout(30):
        while got < count:
            got += sum(len(r) for r in (await consumer.getmany(timeout_ms=500)).values())
    return got


class SlowRevoke(ConsumerRebalanceListener):
    """Cleans up for ``delay_s``, then commits (the documented way to not lose work)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.consumer: Consumer | None = None
        self.commit: str | None = None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        pass

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(self.delay_s)
        assert self.consumer is not None
        try:
            await self.consumer.commit()
            self.commit = "ok"
        except Exception as exc:  # recorded
            self.commit = repr(exc)


async def test_two_concurrent_stops_both_wait_for_the_final_commit(
    kafka: Any, topic_name: str
) -> None:
    """Expected: a second stop() started while the first one runs returns only once the
    consumer is stopped (final revoke done, offsets committed), and does not close the
    client under the first one. Observed: the second stop() runs the shutdown again
    at once (group.close() returns immediately because the first set _closed), closes the
    fetcher and the client while the first is still in the final revoke, and returns
    before the revoke listener finished; the listener's commit then fails (the
    client is closed) and the consumed offsets are never committed."""
    await fill(kafka, topic_name, 2, 20)
    group = f"g-{topic_name}"
    listener = SlowRevoke(1.5)
    consumer = member(kafka, topic_name, group, enable_auto_commit=False)
    listener.consumer = consumer
    consumer.subscribe([topic_name], listener=listener)
    await consumer.start()
    await consume(consumer, 40)
    async with asyncio.timeout(30):
        first = asyncio.ensure_future(consumer.stop())
        await asyncio.sleep(0.2)  # the first stop is in the final revoke now
        await consumer.stop()
        second_returned_after_listener = listener.commit is not None
        await first
    check = member(kafka, topic_name, group)
    async with check:
        committed = {p: await check.committed(TopicPartition(topic_name, p)) for p in range(2)}
    assert listener.commit == "ok", listener.commit
    assert committed == {0: 20, 1: 20}
    assert second_returned_after_listener, "the second stop() returned mid-shutdown"


class StopsInRevoke(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.outcome: str | None = None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        pass

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        assert self.consumer is not None
        try:
            await self.consumer.stop()
            self.outcome = "ok"
        except BaseException as exc:  # recorded
            self.outcome = repr(exc)
            raise


class StopsInAssign(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.outcome: str | None = None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        assert self.consumer is not None
        if not assigned:
            return
        try:
            await self.consumer.stop()
            self.outcome = "ok"
        except BaseException as exc:  # recorded
            self.outcome = repr(exc)
            raise

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        pass


async def test_stop_from_the_assigned_listener_does_not_hang(
    kafka: Any, topic_name: str
) -> None:
    """Expected: a consumer stopped from inside on_partitions_assigned (a listener that
    finds it must shut down) is stopped within a few seconds. Observed: ClassicGroupDriver
    .close() waits for the listener to finish (_in_user_code), the listener waits for
    close(): deadlock until the close timeout."""
    await fill(kafka, topic_name, 1, 5)
    listener = StopsInAssign()
    consumer = member(kafka, topic_name, f"g-{topic_name}")
    listener.consumer = consumer
    consumer.subscribe([topic_name], listener=listener)
    await consumer.start()
    started = time.monotonic()
    async with asyncio.timeout(40):
        while listener.outcome is None:
            try:
                await consumer.getmany(timeout_ms=200)
            except ConsumerStoppedError:
                await asyncio.sleep(0.1)
    took = time.monotonic() - started
    await consumer.stop()
    assert took < 8, f"stop() from on_partitions_assigned took {took:.1f} s ({listener.outcome})"
    assert listener.outcome == "ok", listener.outcome


async def test_stop_from_the_revoke_listener_during_a_rebalance(
    kafka: Any, topic_name: str
) -> None:
    """Expected: stop() called from on_partitions_revoked (in a rebalance caused by a
    second member) stops the consumer within a few seconds."""
    await fill(kafka, topic_name, 2, 5)
    group = f"g-{topic_name}"
    listener = StopsInRevoke()
    a = member(kafka, topic_name, group)
    listener.consumer = a
    a.subscribe([topic_name], listener=listener)
    b = member(kafka, topic_name, group)
    await a.start()
    await consume(a, 10)
    started = time.monotonic()
    try:
        async with b, asyncio.timeout(40):
            while listener.outcome is None:
                try:
                    await a.getmany(timeout_ms=200)
                except ConsumerStoppedError:
                    await asyncio.sleep(0.1)
                await b.getmany(timeout_ms=0)
    finally:
        took = time.monotonic() - started
        await a.stop()
    assert took < 10, f"stop() from on_partitions_revoked took {took:.1f} s ({listener.outcome})"
    assert listener.outcome == "ok", listener.outcome


async def test_stop_releases_a_getmany_that_was_looking_up_committed_offsets(
    kafka: Any, topic_name: str
) -> None:
    """Expected (DESIGN: "stop() releases every waiter at once"): a getmany() that was
    busy in its housekeeping (fetching the committed offsets after an assignment, here
    a slow coordinator answer) when stop() began raises ConsumerStoppedError as soon as
    that step returns. Observed: getmany() goes on to wait for data without re-checking
    the state, and is only released when the fetcher closes, after the whole final
    revoke (here a 4 s listener)."""
    await fill(kafka, topic_name, 1, 5)
    listener = SlowRevoke(4.0)
    consumer = member(kafka, topic_name, f"g-{topic_name}", enable_auto_commit=False)
    listener.consumer = consumer
    consumer.subscribe([topic_name], listener=listener)
    await consumer.start()
    group = consumer.group_coordinator
    assert group is not None
    async with asyncio.timeout(20):
        assert await group.wait_for_assignment(20)
    # an offset is committed: the position comes from it, synchronously
    await consumer.commit({TopicPartition(topic_name, 0): 2})
    gate = asyncio.Event()
    entered = asyncio.Event()
    original = group.fetch_committed

    async def slow_fetch_committed(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await gate.wait()  # a slow OffsetFetch answer
        return await original(*args, **kwargs)

    group.fetch_committed = slow_fetch_committed  # type: ignore[method-assign]
    outcome: list[tuple[str, float]] = []

    async def poll() -> None:
        try:
            await consumer.getmany(timeout_ms=20_000)
            outcome.append(("returned", time.monotonic()))
        except ConsumerStoppedError:
            outcome.append(("stopped", time.monotonic()))

    poller = asyncio.ensure_future(poll())
    async with asyncio.timeout(30):
        await entered.wait()
        stopping = asyncio.ensure_future(consumer.stop())
        await asyncio.sleep(0.2)
        gate.set()
        released_at = time.monotonic()
        await poller
        await stopping
    kind, when = outcome[0]
    assert kind == "stopped", outcome
    assert when - released_at < 1.0, f"getmany() was released {when - released_at:.1f} s late"
