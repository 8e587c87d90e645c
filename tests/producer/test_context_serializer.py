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
from aiokproto.serialization import AWAIT, ContextSerializer, MessageField, SerializationContext
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


class Cached(ContextSerializer[str]):
    """Answers ``serialize_now`` for the values in ``known``; ``serialize`` waits for
    ``gate`` and then knows the value. Counts the awaited calls."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.gate = asyncio.Event()
        self.gate.set()
        self.awaited: list[str] = []

    def serialize_now(self, data: str, ctx: SerializationContext) -> Any:
        if data == "boom-now":
            raise ValueError("boom now")
        if data == "kafka-now":
            raise KafkaConfigError("typed now")
        return f"{ctx.field}:{data}".encode() if data in self.known else AWAIT

    async def serialize(self, data: str, ctx: SerializationContext) -> bytes:
        self.awaited.append(data)
        await self.gate.wait()
        self.known.add(data)
        return f"{ctx.field}:{data}".encode()


async def test_serialize_now_skips_the_await_and_keeps_order(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    kser, vser = Cached(), Cached()
    serdes = {"key_serializer": kser, "value_serializer": vser}
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **serdes, **FAST) as p:
        await p.send_and_wait(topic_name, "a", key="k")
        assert (kser.awaited, vser.awaited) == (["k"], ["a"])  # the first is awaited
        for _ in range(3):  # known now: no coroutine (the compiled path, no headers)
            await p.send(topic_name, "a", key="k")
        await p.send(topic_name, "a", key="k", headers=[("h", b"1")], partition=0)
        assert (kser.awaited, vser.awaited) == (["k"], ["a"])
        # a record waiting for its serializer keeps a known one sent after it behind it
        vser.gate.clear()
        slow = asyncio.create_task(p.send(topic_name, "new", key="k"))
        await asyncio.sleep(0.02)
        fast = asyncio.create_task(p.send(topic_name, "a", key="k"))
        await asyncio.sleep(0.02)
        assert not fast.done()
        vser.gate.set()
        first, second = await asyncio.gather(slow, fast)
        assert (await first).offset < (await second).offset
        # the key serializer answers, the value's must await: both end up written
        await p.send_and_wait(topic_name, "newer", key="k")
        with pytest.raises(SerializationError, match=r"the key_serializer raised.*boom now"):
            await p.send(topic_name, "a", key="boom-now")
        with pytest.raises(SerializationError, match=r"the value_serializer raised.*boom now"):
            await p.send(topic_name, "boom-now", key="k")
        with pytest.raises(KafkaConfigError, match="typed now"):
            await p.send(topic_name, "kafka-now", key="k")
        # send_batch: known values from the cache, a new one awaited, in order
        awaited = len(vser.awaited)
        await (await p.send_batch(topic_name, ["a", "batch-new", None], keys=["k", "k", "k"]))
        assert vser.awaited[awaited:] == ["batch-new"]
        with pytest.raises(SerializationError, match=r"the value_serializer raised.*boom now"):
            await p.send_batch(topic_name, ["a", "boom-now"])
        await p.flush()
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 11)
    assert [m.value() for m in got] == [b"value:a"] * 5 + [
        b"value:new",
        b"value:a",
        b"value:newer",
        b"value:a",
        b"value:batch-new",
        None,
    ]
    assert {m.key() for m in got} == {b"key:k"}


async def test_a_record_queued_for_the_lock_is_not_overtaken(kafka: Any, topic_name: str) -> None:
    # the window: the lock is released with a record still queued for it; a record
    # sent before that one wakes must not take the cached path past it
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=1)
    ser = Cached()
    boot = kafka.bootstrap_servers
    async with Producer(bootstrap_servers=boot, value_serializer=ser, **FAST) as p:
        await p.send_and_wait(topic_name, "known")
        ser.gate.clear()

        async def first_then_more() -> None:
            await p.send(topic_name, "slow")  # waits in serialize, holding the lock
            await p.send(topic_name, "known")  # sent as the lock is let go

        a = asyncio.create_task(first_then_more())
        await asyncio.sleep(0.02)
        b = asyncio.create_task(p.send(topic_name, "queued"))  # unknown: waits for the lock
        await asyncio.sleep(0.02)
        ser.gate.set()
        await asyncio.gather(a, b)
        await p.flush()
    got = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 4)
    order = [b"value:known", b"value:slow", b"value:queued", b"value:known"]
    assert [m.value() for m in got] == order
