"""The public API inside anyio cancel scopes and task groups on the asyncio backend, as
FastAPI/Starlette apps run it: a call cancelled by a scope leaves the client usable
and its data intact."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from aiokproto import Consumer, Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic


async def test_calls_cancelled_by_scopes_leave_the_clients_usable(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0) as p:
        # a deadline that hits sends mid-flight: each send either buffered its record or
        # buffered nothing; the producer goes on
        sent: list[int] = []
        with anyio.move_on_after(0.05):
            for i in range(100_000):
                handle = await p.send(topic_name, b"%d" % i)
                sent.append(i)
        await p.flush()
        assert (await handle).offset == len(sent) - 1
        async with anyio.create_task_group() as tg:
            for i in range(len(sent), len(sent) + 10):
                tg.start_soon(p.send_and_wait, topic_name, b"%d" % i)
        total = len(sent) + 10

    async with Consumer(bootstrap_servers=kafka.bootstrap_servers) as c:
        c.assign([tp])
        await c.seek_to_beginning(tp)
        # a getone() waiting for data that never comes, cancelled by its scope
        with anyio.move_on_after(0.2) as scope:
            c.seek(tp, total)
            await c.getone()
        assert scope.cancelled_caught
        c.seek(tp, 0)
        seen: list[bytes] = []
        with anyio.fail_after(20):
            while len(seen) < total:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    seen.extend(r.value for r in recs)
        assert sorted(int(v) for v in seen) == list(range(total))


async def test_a_task_group_stopping_a_consumer_loop_ends_it_cleanly(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    consumer = Consumer(topic_name, bootstrap_servers=kafka.bootstrap_servers)
    await consumer.start()
    got: list[Any] = []

    async def loop() -> None:
        async for record in consumer:
            got.append(record)

    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop)
    # the iteration was cancelled from outside; the consumer still works and stops
    assert consumer.assignment()
    with anyio.fail_after(10):
        await consumer.stop()
    assert got == []
