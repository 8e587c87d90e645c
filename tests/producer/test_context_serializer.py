"""The producer's context-serializer path against a real broker: the context it is
given, call order kept while the first serializer waits, a cancelled send buffers
nothing and blocks nobody, errors (a KafkaError as raised, any other wrapped)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Producer
from aiokproto.errors import KafkaConfigError, KafkaError
from aiokproto.producer.producer import SerializationError
from aiokproto.serialization import ContextSerializer, MessageField, SerializationContext
from tests.producer.helpers import FAST, consume, create_topic


class Gated(ContextSerializer[str]):
    """Waits for ``gate`` on the values named in ``wait_on``; records each context."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.wait_on: set[str] = set()
        self.seen: list[SerializationContext] = []

    async def serialize(self, data: str, ctx: SerializationContext) -> bytes:
        self.seen.append(ctx)
        if data in self.wait_on:
            await self.gate.wait()
        if data == "boom":
            raise ValueError("boom")
        if data == "kafka":
            raise KafkaConfigError("typed")
        return data.encode()


async def test_context_order_cancel_and_errors(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    ser = Gated()
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers,
        key_serializer=str.encode,  # a plain one beside it keeps its path
        value_serializer=ser,
        **FAST,
    ) as p:
        await p.send_and_wait(topic_name, "warm", key="k", headers=[("h", b"1")])
        assert ser.seen[0] == SerializationContext(topic_name, MessageField.VALUE, [("h", b"1")])
        # the first waits in its serializer: the ones after it wait behind it
        ser.wait_on = {"first"}
        first = asyncio.create_task(p.send(topic_name, "first"))
        rest = [asyncio.create_task(p.send(topic_name, f"v{i}")) for i in range(5)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in rest)
        ser.gate.set()
        handles = await asyncio.gather(first, *rest)
        offsets = [(await h).offset for h in handles]
        assert offsets == sorted(offsets)
        # a send cancelled while its serializer waits buffers nothing, blocks nobody
        ser.gate.clear()
        ser.wait_on = {"cancelled"}
        stuck = asyncio.create_task(p.send(topic_name, "cancelled"))
        await asyncio.sleep(0.05)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        await p.send_and_wait(topic_name, "after")
        with pytest.raises(SerializationError, match="boom"):
            await p.send(topic_name, "boom")
        with pytest.raises(KafkaConfigError, match="typed"):
            await p.send(topic_name, "kafka")
        with pytest.raises(KafkaError):
            p.create_batch()
        delivery = await p.send_batch(topic_name, ["b1", None, "b2"], keys=["x", "y", None])
        await delivery
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 11)
    assert [m.value() for m in got] == [
        b"warm", b"first", b"v0", b"v1", b"v2", b"v3", b"v4", b"after", b"b1", None, b"b2"
    ]
    assert [m.key() for m in got][-3:] == [b"x", b"y", None]
