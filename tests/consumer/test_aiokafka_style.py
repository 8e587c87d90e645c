"""Consumer paths aiokafka users rely on, written the way aiokafka code calls them."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.abc import ConsumerRebalanceListener
from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.errors import (
    ConsumerStoppedError,
    IllegalStateError,
    KafkaConfigError,
    KafkaError,
    NoGroupError,
    OffsetOutOfRangeError,
)
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


# ---------------------------------------------------------------------------------------
# a hostile review of the aiokafka-compatibility layer: what aiokafka code does after
# the mechanical rename
# ---------------------------------------------------------------------------------------


async def topic_with_records(kafka: Any, topic: str, n: int = 5) -> None:
    """Two partitions with ``n`` records each (values b"0".."n-1")."""
    await create_topic(kafka.bootstrap_servers, topic, partitions=2)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for i in range(n):
            await p.send(topic, b"%d" % i, partition=0)
            await p.send(topic, b"%d" % i, partition=1)
        await p.flush()


def group_consumer(kafka: Any, topic: str, **options: Any) -> Consumer:
    return Consumer(
        topic,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id="g-" + topic,
        auto_offset_reset="earliest",
        **options,
    )


# ---------------------------------------------------------------------------------------
# consumer: commit shapes
# ---------------------------------------------------------------------------------------


async def test_commit_shapes(kafka: Any, topic_name: str) -> None:
    """Held: (1,), ("x", None), (5, 123), (5, None), [5, "m"], 5.0, "5", None, -1 and
    True raise KafkaConfigError; (5, "m") commits with its metadata; a too-long
    metadata gives OffsetMetadataTooLargeError. Failing: see the asserts below."""
    await topic_with_records(kafka, topic_name)
    tp0 = TopicPartition(topic_name, 0)
    async with asyncio.timeout(30), group_consumer(
        kafka, topic_name, enable_auto_commit=False
    ) as c:
        await c.getone()
        for bad in ((1,), ("x", None), (5, 123), (5, None), [5, "m"], 5.0, "5", None, -1, True):
            with pytest.raises(KafkaConfigError):
                await c.commit({tp0: bad})
        await c.commit({tp0: (3, "meta")})
        assert await c.committed(tp0) == 3
        with pytest.raises(KafkaError):
            await c.commit({tp0: (4, "x" * 5000)})  # over offset.metadata.max.bytes

        # OffsetAndMetadata is checked as loosely as the tuple is strictly: observed
        # AttributeError "'int' object has no attribute 'encode'" from the encoder.
        # Fix: in Consumer.commit, validate om.offset (int in [0, 2**63)), om.metadata
        # (str or None) and om.leader_epoch (int32) for OffsetAndMetadata values too.
        with pytest.raises((KafkaConfigError, TypeError)):
            await c.commit({tp0: OffsetAndMetadata(5, 123)})  # type: ignore[arg-type]
        with pytest.raises((KafkaConfigError, TypeError)):
            await c.commit({tp0: OffsetAndMetadata(5.5)})  # type: ignore[arg-type]
        # observed: ValueError "OffsetCommitRequest v10: a value is out of range"
        with pytest.raises(KafkaConfigError):
            await c.commit({tp0: 2**63})
        # observed: CommitFailedError "not assigned ... the group rebalanced": a str
        # partition is a caller's type error, not a rebalance. Fix: run _check_tps-like
        # validation (int partition) on the keys.
        with pytest.raises(KafkaConfigError):
            await c.commit({(topic_name, "0"): 5})  # type: ignore[dict-item]
        assert await c.committed(tp0) == 3  # nothing above changed it


# ---------------------------------------------------------------------------------------
# consumer: unsubscribe() (sync, returns an awaitable)
# ---------------------------------------------------------------------------------------


async def test_unsubscribe_then_assign_keeps_the_assignment(kafka: Any, topic_name: str) -> None:
    """aiokafka code: `consumer.unsubscribe(); consumer.assign([tp])`. Observed: the
    background leave task later runs _drop_subscription() (subs.version did not change:
    assign() does not bump it), which wipes the manual assignment: assignment() is
    empty and getone() waits forever. Fix: in Consumer._leave, drop only if the
    subscription is still "none" (nothing was subscribed or assigned meanwhile)."""
    await topic_with_records(kafka, topic_name)
    tp0 = TopicPartition(topic_name, 0)
    async with asyncio.timeout(40), group_consumer(kafka, topic_name) as c:
        await c.getone()
        c.unsubscribe()
        c.assign([tp0])
        c.seek(tp0, 0)
        await asyncio.sleep(1.0)  # the leave has happened by now
        assert c.assignment() == frozenset({tp0})
        async with asyncio.timeout(10):
            record = await c.getone()
        assert (record.partition, record.offset) == (0, 0)


async def test_unsubscribe_then_subscribe_gets_an_assignment(kafka: Any, topic_name: str) -> None:
    """aiokafka code: `consumer.unsubscribe(); consumer.subscribe([t])`. Observed: the
    member never gets partitions again (getone() waits; assignment() stays empty):
    subscribe() posts JOIN_NEEDED at once, the leave task posts UNSUBSCRIBED later, so
    the group is left after the rejoin request and nothing asks to join again. Fix:
    post UNSUBSCRIBED synchronously in Consumer.unsubscribe() (before returning), or
    have _leave call group.request_rejoin() when the subscription changed meanwhile."""
    await topic_with_records(kafka, topic_name)
    async with asyncio.timeout(40), group_consumer(
        kafka, topic_name, enable_auto_commit=False
    ) as c:
        await c.getone()
        c.unsubscribe()
        c.subscribe([topic_name])
        async with asyncio.timeout(15):
            await c.getone()
        assert c.assignment()


async def test_unsubscribe_twice_keeps_the_final_commit(kafka: Any, topic_name: str) -> None:
    """Observed: the second unsubscribe() sees no subscription and calls
    _drop_subscription() at once, dropping every position before the first call's
    leave task made its final auto-commit: nothing is committed and the records are
    consumed again by the next member. Fix: when a leave is in progress
    (self._leaving), return it (shielded) instead of dropping the state."""
    await topic_with_records(kafka, topic_name)
    async with asyncio.timeout(40), group_consumer(kafka, topic_name) as c:
        first = await c.getone()
        u1 = c.unsubscribe()
        u2 = c.unsubscribe()
        await u1
        await u2
        assert await c.committed(TopicPartition(topic_name, first.partition)) == first.offset + 1


async def test_awaiting_unsubscribe_across_stop_is_not_cancelled(
    kafka: Any, topic_name: str
) -> None:
    """Observed: a task awaiting unsubscribe()'s result gets CancelledError when
    stop() runs (Consumer._shutdown cancels the leave tasks): a task that nobody
    cancelled sees a cancellation (TaskGroup/asyncio.timeout treat it as theirs).
    Expected: it completes (stop() left the group) or raises ConsumerStoppedError.
    Fix: let _shutdown await the leave tasks (or resolve them) instead of cancelling
    them, or hand out asyncio.shield(leaving) from unsubscribe()."""
    await topic_with_records(kafka, topic_name)
    c = group_consumer(kafka, topic_name)
    async with asyncio.timeout(40):
        await c.start()
        await c.getone()
        waiter = asyncio.ensure_future(_wait(c.unsubscribe()))
        await asyncio.sleep(0)
        await c.stop()
        try:
            await waiter
        except ConsumerStoppedError:
            pass
        except asyncio.CancelledError:
            pytest.fail("the unsubscribe() awaiter was cancelled by stop()")


async def test_cancelling_the_unsubscribe_awaiter_still_unsubscribes(
    kafka: Any, topic_name: str
) -> None:
    """Observed: unsubscribe() returns the leave task itself, so cancelling the task
    that awaits it cancels the leave: the group is left, but _drop_subscription()
    never runs and assignment() keeps reporting both partitions (and their metadata
    stays tracked). Expected: cancelling a waiter does not cancel the unsubscribe.
    Fix: return asyncio.shield(leaving) (wrapped), or drop in a finally/done callback."""
    await topic_with_records(kafka, topic_name)
    async with asyncio.timeout(40), group_consumer(kafka, topic_name) as c:
        await c.getone()
        waiter = asyncio.ensure_future(_wait(c.unsubscribe()))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        await until(lambda: not c.assignment(), 5)


async def _wait(awaitable: Any) -> None:
    await awaitable


# ---------------------------------------------------------------------------------------
# consumer: sync methods, listeners, after stop
# ---------------------------------------------------------------------------------------


class _SavingListener(ConsumerRebalanceListener):
    """aiokafka-style listener that saves state in on_partitions_revoked."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.saved: dict[str, Any] = {}

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        for tp in sorted(revoked)[:1]:
            for name, call in (
                ("position", self.consumer.position),
                ("committed", self.consumer.committed),
            ):
                try:
                    self.saved[name] = await call(tp)
                except KafkaError as exc:
                    self.saved[name] = exc

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        for tp in assigned:  # aiokafka's local-state recipe
            await self.consumer.seek_to_beginning(tp)


async def test_listener_run_by_stop_can_read_positions(kafka: Any, topic_name: str) -> None:
    """stop() now calls on_partitions_revoked (README: "the member can save its
    state"), which aiokafka never did. Observed: in that call position() and
    committed() raise ConsumerStoppedError ("the consumer is stopping"), while
    commit() works, so the state cannot be saved. Fix: let position()/committed()
    (and partitions_for_topic) run while stopping when group.revoking, the condition
    commit() already uses."""
    await topic_with_records(kafka, topic_name)
    c = Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id="g-" + topic_name,
        auto_offset_reset="earliest",
    )
    listener = _SavingListener(c)
    c.subscribe([topic_name], listener=listener)
    async with asyncio.timeout(40):
        await c.start()
        try:
            await c.getone()
        finally:
            await c.stop()
    assert isinstance(listener.saved.get("position"), int), listener.saved
    assert not isinstance(listener.saved.get("committed"), BaseException), listener.saved


async def test_seek_beyond_int64_is_refused_and_other_partitions_keep_flowing(
    kafka: Any, topic_name: str
) -> None:
    """Observed: seek(tp, 2**64) is accepted; the next FetchRequest fails to encode and
    the whole fetcher dies ("the consumer's fetcher failed: ValueError(... int too
    large to convert)"): every partition, not just that one, raises on getmany().
    Expected: seek raises KafkaConfigError at once. Fix: in SubscriptionState.seek,
    require offset < 2**63."""
    await topic_with_records(kafka, topic_name)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with asyncio.timeout(30), Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        c.assign([tp0, tp1])
        with pytest.raises(KafkaConfigError):
            c.seek(tp0, 2**64)
        got = await c.getmany(tp1, timeout_ms=5000)
        assert got.get(tp1)


async def test_held_offset_out_of_range_with_auto_offset_reset_none(
    kafka: Any, topic_name: str
) -> None:
    await topic_with_records(kafka, topic_name)
    tp0 = TopicPartition(topic_name, 0)
    async with asyncio.timeout(30), Consumer(
        bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="none"
    ) as c:
        c.assign([tp0])
        c.seek(tp0, 100)
        try:  # aiokafka's except clause
            await c.getone()
        except OffsetOutOfRangeError as e:
            assert e.args[0] == {tp0: 100}
        else:
            pytest.fail("no OffsetOutOfRangeError")


async def test_held_sync_methods_and_group_calls_before_and_after_stop(
    kafka: Any, topic_name: str
) -> None:
    await topic_with_records(kafka, topic_name)
    tp0 = TopicPartition(topic_name, 0)
    fresh = Consumer(bootstrap_servers=kafka.bootstrap_servers, group_id="g-" + topic_name)
    with pytest.raises(IllegalStateError):
        fresh.partitions_for_topic(topic_name)
    with pytest.raises(IllegalStateError):
        await fresh.commit({tp0: 1})
    async with asyncio.timeout(30):
        async with group_consumer(kafka, topic_name) as c:
            await c.getone()
            with pytest.raises(KafkaConfigError):
                c.partitions_for_topic(None)  # type: ignore[arg-type]
            with pytest.raises(KafkaConfigError):
                await c.seek_to_committed("x")  # type: ignore[arg-type]
            with pytest.raises(IllegalStateError):
                c.last_poll_timestamp(TopicPartition(topic_name, 9))
            assert isinstance(c.last_poll_timestamp(tp0), int)
        with pytest.raises(ConsumerStoppedError):
            c.partitions_for_topic(topic_name)
        with pytest.raises(ConsumerStoppedError):
            await c.commit({tp0: 1})
        with pytest.raises(ConsumerStoppedError):
            await c.seek_to_committed()
        async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as nogroup:
            with pytest.raises(NoGroupError):  # aiokafka's IllegalOperation
                await nogroup.commit({tp0: 1})


async def test_subscribe_after_stop_is_refused(kafka: Any) -> None:
    """Observed: subscribe() on a stopped consumer returns None and does nothing (no
    fetch will ever happen); partitions_for_topic(), commit() etc. raise
    ConsumerStoppedError. Fix: Consumer.subscribe (and assign) raise
    ConsumerStoppedError when self._state is "stopping"/"stopped"."""
    c = Consumer(bootstrap_servers=kafka.bootstrap_servers)
    async with asyncio.timeout(20):
        async with c:
            pass
    with pytest.raises(ConsumerStoppedError):
        c.subscribe(["some-topic"])


async def test_an_ill_typed_partition_is_refused_with_a_subscription(
    kafka: Any, topic_name: str
) -> None:
    """With a subscription, getmany(TopicPartition(t, "0")) waited for a partition that
    can never be assigned and returned {}: a str partition is a caller's type error."""
    await topic_with_records(kafka, topic_name)
    async with asyncio.timeout(30), group_consumer(kafka, topic_name) as c:
        for call in (c.getmany, c.getone, c.position, c.committed):
            with pytest.raises(KafkaConfigError):
                await call(TopicPartition(topic_name, "0"))  # type: ignore[arg-type]
