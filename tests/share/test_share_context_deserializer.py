"""A share consumer whose ContextDeserializer is awaiting when the call is cancelled:
the records it had acquired are released (implicit mode would otherwise accept them
unseen), so they come again."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokproto.producer import Producer
from aiokproto.serialization import ContextDeserializer, SerializationContext
from aiokproto.share import ShareConsumer
from tests.consumer.conftest import create_topic
from tests.share.conftest import configure_share_group


class Gated(ContextDeserializer[str]):
    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> str:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        return (data or b"").decode()


async def test_a_cancelled_call_releases_what_it_was_deserializing(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
        for i in range(3):
            await p.send(topic_name, b"v%d" % i)
        await p.flush()
    group = f"s-{topic_name}"
    await configure_share_group(kafka.bootstrap_servers, group)
    de = Gated()
    async with ShareConsumer(
        topic_name, bootstrap_servers=kafka.bootstrap_servers, group_id=group, value_deserializer=de
    ) as c:
        stuck = asyncio.create_task(c.getmany(timeout_ms=30_000))
        await asyncio.wait_for(de.waiting.wait(), 30)
        stuck.cancel()
        await asyncio.gather(stuck, return_exceptions=True)
        de.gate.set()
        got: list[Any] = []
        async with asyncio.timeout(30):
            while len(got) < 3:
                batch = await c.getmany(timeout_ms=1000)
                got += [r for recs in batch.values() for r in recs]
    assert sorted(r.value for r in got) == ["v0", "v1", "v2"]
    assert all(r.delivery_count == 2 for r in got)
