"""Consumer groups through the ``Consumer`` API against a real broker, and mixed with
librdkafka (confluent-kafka) members."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import aproduce, create_topic

ck = pytest.importorskip("confluent_kafka")

FAST: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


async def eventually(check: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def records(partitions: int, n: int) -> list[tuple[int, bytes | None, bytes, None]]:
    return [(i % partitions, None, f"v{i}".encode(), None) for i in range(n)]


async def test_new_member_resumes_from_committed_offset(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, 1)
    await aproduce(kafka.bootstrap_servers, topic_name, records(1, 20))
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    opts = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        **FAST,
    }
    async with Consumer(topic_name, **opts) as first:
        seen: list[ConsumerRecord] = []
        while len(seen) < 10:
            seen.append(await first.getone())
        await first.commit({tp: seen[-1].offset + 1})
        assert await first.committed(tp) == 10
    async with Consumer(topic_name, **opts) as second:
        record = await asyncio.wait_for(second.getone(), 30)
        assert record.offset == 10


async def test_revoke_commits_so_records_are_consumed_once(kafka: Any, topic_name: str) -> None:
    """Eager rebalance mid-stream: the auto-commit before the revoke hands over exactly."""
    n, parts = 400, 4
    await create_topic(kafka.bootstrap_servers, topic_name, parts)
    await aproduce(kafka.bootstrap_servers, topic_name, records(parts, n))
    opts = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": f"g-{topic_name}",
        "auto_offset_reset": "earliest",
        "max_poll_records": 10,
        "partition_assignment_strategy": ("range",),
        **FAST,
    }
    seen: list[tuple[int, int]] = []

    async def consume(consumer: Consumer, stop: asyncio.Event, slow: bool) -> None:
        while not stop.is_set():
            got = await consumer.getmany(timeout_ms=200, max_records=10)
            for recs in got.values():
                seen.extend((r.partition, r.offset) for r in recs)
            if slow and got:
                await asyncio.sleep(0.05)  # still busy when the second member arrives

    stop = asyncio.Event()
    async with Consumer(topic_name, **opts) as a:
        task_a = asyncio.create_task(consume(a, stop, slow=True))
        await eventually(lambda: len(seen) >= 40, 30, "the first records")
        async with Consumer(topic_name, **opts) as b:
            task_b = asyncio.create_task(consume(b, stop, slow=False))
            try:
                await eventually(lambda: len(seen) >= n, 60, f"{n} records")
                await asyncio.sleep(0.5)
            finally:
                stop.set()
                await asyncio.gather(task_a, task_b)
            assert a.assignment() and b.assignment()
    assert len(seen) == n and len(set(seen)) == n, "a record was consumed twice"


class LibrdkafkaMember:
    """A confluent-kafka consumer polling in a thread: commits each record synchronously."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str) -> None:
        # librdkafka joins as soon as it subscribes (no poll needed): not before run()
        self.topic = topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": strategy,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
        self.seen: list[tuple[int, int]] = []
        self.assignment: frozenset[int] = frozenset()
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        consumer = ck.Consumer(self.config)
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.1)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                self.seen.append((msg.partition(), msg.offset()))
                consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()


@pytest.mark.kafka39
@pytest.mark.parametrize("first", ["librdkafka", "aiokproto"])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_mixed_group_with_librdkafka(
    kafka: Any, topic_name: str, strategy: str, first: str
) -> None:
    """Whoever joins first leads: both read the other's assignment bytes."""
    n, parts = 600, 6
    await create_topic(kafka.bootstrap_servers, topic_name, parts)
    group = f"g-{topic_name}"
    theirs = LibrdkafkaMember(kafka.bootstrap_servers, topic_name, group, strategy)
    thread: asyncio.Task[None] | None = None
    if first == "librdkafka":
        thread = asyncio.create_task(asyncio.to_thread(theirs.run))
        await eventually(lambda: bool(theirs.assignment), 30, "librdkafka's first assignment")
    ours_seen: list[tuple[int, int]] = []
    try:
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            partition_assignment_strategy=(strategy,),
            **FAST,
        ) as ours:
            group_task = ours.group_coordinator
            assert group_task is not None
            if thread is None:
                while not ours.assignment():
                    await ours.getmany(timeout_ms=100)
                thread = asyncio.create_task(asyncio.to_thread(theirs.run))

            def split() -> bool:
                mine = {tp.partition for tp in ours.assignment()}
                return (
                    bool(mine)
                    and bool(theirs.assignment)
                    and not (mine & theirs.assignment)
                    and (mine | theirs.assignment) == set(range(parts))
                )

            deadline = time.monotonic() + 40
            while not split():
                assert time.monotonic() < deadline, (ours.assignment(), theirs.assignment)
                await ours.getmany(timeout_ms=100)
            mine = {tp.partition for tp in ours.assignment()}
            await aproduce(kafka.bootstrap_servers, topic_name, records(parts, n))
            deadline = time.monotonic() + 40
            while len(ours_seen) + len(theirs.seen) < n:
                assert time.monotonic() < deadline, (len(ours_seen), len(theirs.seen))
                got = await ours.getmany(timeout_ms=200)
                for recs in got.values():
                    ours_seen.extend((r.partition, r.offset) for r in recs)
                if got:
                    await ours.commit()
            assert {tp.partition for tp in ours.assignment()} == mine, "no rebalance meanwhile"
            # the first member to join leads: the other one reads its assignment bytes
            assert group_task.is_leader == (first == "aiokproto")
    finally:
        theirs.stop.set()
        if thread is not None:
            await thread
    assert not theirs.errors
    everything = ours_seen + theirs.seen
    assert len(everything) == n and len(set(everything)) == n
    assert {p for p, _ in ours_seen} == mine
    assert not {p for p, _ in theirs.seen} & mine
