"""The consumer's ContextDeserializer path against a real broker: records being awaited
are not consumed yet (an auto-commit stays in front of them), a call cancelled while a
deserializer waits hands them out again later, and the context a deserializer gets."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.consumer import RecordDeserializationError
from aiokproto.serialization import ContextDeserializer, MessageField, SerializationContext
from aiokproto.structs import TopicPartition
from tests.producer.helpers import FAST, create_topic


class Gated(ContextDeserializer[str]):
    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.seen: list[SerializationContext] = []

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> str:
        self.seen.append(ctx)
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        return (data or b"").decode().upper()


async def test_awaited_records_are_not_committed_and_survive_a_cancel(
    kafka: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        for i in range(3):
            await p.send(topic_name, b"v%d" % i, headers=[("h", b"1")])
        await p.flush()
    tp = TopicPartition(topic_name, 0)
    de = Gated()
    async with Consumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=100,
        key_deserializer=lambda k: k,  # a plain one beside it keeps its path
        value_deserializer=de,
    ) as c:
        first = asyncio.create_task(c.getone())
        await asyncio.wait_for(de.waiting.wait(), 30)
        await asyncio.sleep(0.5)  # several auto-commit intervals
        assert (await c.committed(tp)) in (None, 0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        de.gate.set()
        async with asyncio.timeout(30):
            got = [await c.getone() for _ in range(3)]
    assert [r.value for r in got] == ["V0", "V1", "V2"]
    ctx = de.seen[0]
    assert (ctx.topic, ctx.field, list(ctx.headers or [])) == (
        topic_name,
        MessageField.VALUE,
        [("h", b"1")],
    )


class FailsOn(ContextDeserializer[bytes]):
    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> bytes:
        if data == b"bad":
            raise ValueError("cannot read it")
        return data or b""


async def test_a_failure_after_handed_records_is_raised_by_the_next_call(
    kafka: Any, topic_name: str
) -> None:
    # partition 0 fails at offset 1 in a drain that hands out offset 0: the error must
    # come with the next call (as a plain deserializer's does) even if that call asks
    # for partition 1 only; before, it was dropped, and partition 0 silently stopped
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
        await p.send(topic_name, b"good", partition=0)
        await p.send(topic_name, b"bad", partition=0)
        for i in range(3):
            await p.send(topic_name, b"x%d" % i, partition=1)
        await p.flush()
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        value_deserializer=FailsOn(),
    ) as c:
        c.assign([tp0, tp1])
        got: dict[TopicPartition, list[bytes]] = {tp0: [], tp1: []}
        want: tuple[TopicPartition, ...] = ()
        with pytest.raises(RecordDeserializationError) as info:
            async with asyncio.timeout(10):  # never raised before
                while True:
                    for tp, recs in (await c.getmany(*want, timeout_ms=500)).items():
                        got[tp] += [r.value for r in recs]
                    if got[tp0]:
                        want = (tp1,)  # partition 0 handed out what it could
        assert (info.value.tp, info.value.offset) == (tp0, 1)
        assert got[tp0] == [b"good"] and await c.position(tp0) == 1
