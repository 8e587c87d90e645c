"""Context serializers and deserializers (the schema registry's) type the clients."""

# ruff: noqa: E501 - one call per line, so mypy's line numbers match the marks

from dataclasses import dataclass

from aiokproto import Consumer, Producer
from aiokproto.serialization import ContextDeserializer, ContextSerializer, SerializationContext
from aiokproto.share import ShareConsumer


@dataclass
class Order:
    id: int


class OrderSerializer(ContextSerializer[Order]):
    async def serialize(self, data: Order, ctx: SerializationContext) -> bytes:
        return str(data.id).encode()


class OrderDeserializer(ContextDeserializer[Order]):
    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Order:
        return Order(int(data or b"0"))


async def use() -> None:
    async with Producer(bootstrap_servers="h:9092", key_serializer=str.encode, value_serializer=OrderSerializer()) as p:
        await p.send("t", Order(1), key="k")
        await p.send("t", {"id": 1}, key="k")  # E: Argument 2 to "send" of "Producer" has incompatible type "dict[str, int]"; expected "Order | None"
    async with Consumer("t", bootstrap_servers="h:9092", value_deserializer=OrderDeserializer()) as c:
        record = await c.getone()
        order: Order = record.value
        assert order.id >= 0
    async with ShareConsumer("t", bootstrap_servers="h:9092", group_id="g", value_deserializer=OrderDeserializer()) as s:
        async for shared in s:
            assert shared.value.id >= 0
