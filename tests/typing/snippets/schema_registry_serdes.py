"""The registry's serdes type the clients: from_dict/to_dict give record.value's and
send()'s types; without them the value is Any (the schema decides what it holds)."""

# ruff: noqa: E501, F841 - one call per line, so mypy's line numbers match the marks

from dataclasses import dataclass
from typing import Any

from aiokproto import Consumer, Producer
from aiokproto.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    SchemaRegistryClient,
)
from aiokproto.serialization import SerializationContext
from aiokproto.share import ShareConsumer

SCHEMA = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"}]}'


@dataclass
class Order:
    id: int


def order_from_dict(d: dict[str, Any], ctx: SerializationContext) -> Order:
    return Order(d["id"])


def order_to_dict(order: Order, ctx: SerializationContext) -> dict[str, Any]:
    return {"id": order.id}


async def consume(sr: SchemaRegistryClient) -> None:
    async with Consumer("t", bootstrap_servers="h:9092", value_deserializer=AvroDeserializer(sr, SCHEMA, order_from_dict)) as c:
        record = await c.getone()
        order: Order = record.value
        wrong: str = record.value  # E: Incompatible types in assignment (expression has type "Order", variable has type "str")
        key: str = record.key  # E: Incompatible types in assignment (expression has type "bytes | None", variable has type "str")
    async with Consumer("t", bootstrap_servers="h:9092", value_deserializer=AvroDeserializer(sr, from_dict=order_from_dict)) as c2:
        async for r in c2:
            same: Order = r.value
            n: int = r.value.id
            bad: str = r.value.id  # E: Incompatible types in assignment (expression has type "int", variable has type "str")
    async with Consumer("t", bootstrap_servers="h:9092", value_deserializer=AvroDeserializer(sr)) as c3:
        anything = await c3.getone()
        as_dict: dict[str, Any] = anything.value  # Any: whatever the writer's schema holds
    async with Consumer("t", bootstrap_servers="h:9092", value_deserializer=JSONDeserializer(SCHEMA, order_from_dict, sr)) as c4:
        j: Order = (await c4.getone()).value
        wrong_j: bytes = (await c4.getone()).value  # E: Incompatible types in assignment (expression has type "Order", variable has type "bytes")
    async with ShareConsumer("t", bootstrap_servers="h:9092", group_id="g", value_deserializer=AvroDeserializer(sr, SCHEMA, order_from_dict)) as s:
        async for shared in s:
            shared_order: Order = shared.value
    AvroDeserializer(sr, SCHEMA, from_dict=lambda d: d)  # E: Argument "from_dict" to "AvroDeserializer" has incompatible type


async def produce(sr: SchemaRegistryClient) -> None:
    async with Producer(bootstrap_servers="h:9092", value_serializer=AvroSerializer(sr, SCHEMA, order_to_dict)) as p:
        await p.send("t", Order(1))
        await p.send("t", {"id": 1})  # E: Argument 2 to "send" of "Producer" has incompatible type "dict[str, int]"; expected "Order | None"
    async with Producer(bootstrap_servers="h:9092", value_serializer=JSONSerializer(SCHEMA, sr, order_to_dict)) as pj:
        await pj.send("t", Order(1))
        await pj.send("t", 1)  # E: Argument 2 to "send" of "Producer" has incompatible type "int"; expected "Order | None"
    async with Producer(bootstrap_servers="h:9092", value_serializer=AvroSerializer(sr, SCHEMA)) as untyped:
        await untyped.send("t", {"id": 1})  # a dict, or anything the schema takes
