"""An Avro order pipeline through a schema registry: a producer writes ``Order``
dataclasses with ``AvroSerializer``, a consumer service reads them back as ``Order``
objects with ``AvroDeserializer`` (typed: ``record.value`` is an ``Order``), through a
schema change, and records it cannot decode go to a dead-letter list instead of
stopping it.

    .venv/bin/python examples/avro_orders.py

Needs ``pip install 'aiokproto[schema-registry]'``. Starts a local single-node Kafka
and the local Apicurio registry the tests use (unless KAFKA_BOOTSTRAP_SERVERS and
SCHEMA_REGISTRY_URL name running ones). The producer writes 300 orders with schema
v1, then 300 with v2 (a new ``coupon`` field with a default: a BACKWARD compatible
change, which the registry checks when v2 is registered); in between, a legacy client
writes a plain JSON order (not in the registry's wire format) and a record naming a
schema id the registry never issued. The service, still on v1, reads everything: v2
orders are resolved to v1 (the coupon is dropped), the two bad records are reported
with their typed errors and skipped, and it stops when all 600 orders are in.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.producer import Producer
from aiokproto.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
)
from aiokproto.serialization import SerializationContext

ORDERS_PER_VERSION = 300
FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount_cents", "type": "int"},
]
ORDER_V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": FIELDS})
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [*FIELDS, {"name": "coupon", "type": ["null", "string"], "default": None}],
    }
)


@dataclass(frozen=True)
class Order:
    id: int
    customer: str
    amount_cents: int
    coupon: str | None = None


def order_to_dict(order: Order, ctx: SerializationContext) -> dict[str, Any]:
    return {
        "id": order.id,
        "customer": order.customer,
        "amount_cents": order.amount_cents,
        "coupon": order.coupon,  # written by v2, ignored by v1 (fastavro skips extras)
    }


def order_from_dict(d: dict[str, Any], ctx: SerializationContext) -> Order:
    return Order(d["id"], d["customer"], d["amount_cents"], d.get("coupon"))


async def produce(bootstrap: str, sr: SchemaRegistryClient, topic: str, run: str) -> None:
    """v1 orders, two records a registry client cannot read, then v2 orders."""
    v1 = AvroSerializer(sr, ORDER_V1, order_to_dict)
    v2 = AvroSerializer(sr, ORDER_V2, order_to_dict)
    async with Producer(
        bootstrap_servers=bootstrap, key_serializer=str.encode, value_serializer=v1, linger_ms=5
    ) as producer:
        for i in range(ORDERS_PER_VERSION):
            await producer.send(topic, Order(i, f"{run}-c{i % 7}", 100 + i), key=f"c{i % 7}")
        await producer.flush()
    async with Producer(bootstrap_servers=bootstrap) as legacy:
        # a client that does not use the registry, and one writing an unknown schema id
        await legacy.send(topic, json.dumps({"id": -1}).encode(), key=b"c0")
        await legacy.send(topic, struct.pack(">bI", 0, 2_000_000_000) + b"\x02", key=b"c0")
        await legacy.flush()
    async with Producer(
        bootstrap_servers=bootstrap, key_serializer=str.encode, value_serializer=v2, linger_ms=5
    ) as producer:
        for i in range(ORDERS_PER_VERSION, 2 * ORDERS_PER_VERSION):
            order = Order(i, f"{run}-c{i % 7}", 100 + i, coupon="WINTER")
            await producer.send(topic, order, key=f"c{i % 7}")
        await producer.flush()
    print(f"produced {2 * ORDERS_PER_VERSION} orders (v1, then v2) and 2 undecodable records")


class OrderService:
    """Totals orders per customer; undecodable records go to ``dead_letters``."""

    def __init__(self, consumer: Consumer[bytes | None, Order]) -> None:
        self.consumer = consumer
        self.totals: dict[str, int] = {}
        self.orders = 0
        self.dead_letters: list[str] = []

    async def run(self, expected: int) -> None:
        while self.orders < expected:
            try:
                async for record in self.consumer:
                    order = record.value  # an Order: AvroDeserializer[Order]
                    self.totals[order.customer] = (
                        self.totals.get(order.customer, 0) + order.amount_cents
                    )
                    self.orders += 1
                    if self.orders >= expected:
                        break
            except RecordDeserializationError as exc:
                # typed: NotWireFormatError, UnknownSchemaError, SchemaMismatchError, ...
                self.dead_letters.append(f"offset {exc.offset}: {type(exc.cause).__name__}")
                self.consumer.seek(exc.tp, exc.offset + 1)  # skip it, go on
        await self.consumer.commit()


async def serve(bootstrap: str, registry_url: str) -> None:
    run = uuid.uuid4().hex[:6]
    topic = f"avro-orders-{run}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    async with SchemaRegistryClient({"url": registry_url}) as sr:
        await produce(bootstrap, sr, topic, run)
        reader = AvroDeserializer(sr, ORDER_V1, order_from_dict)  # the service is still on v1
        async with Consumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"order-service-{run}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            value_deserializer=reader,
        ) as consumer:
            service = OrderService(consumer)
            await asyncio.wait_for(service.run(2 * ORDERS_PER_VERSION), timeout=120)
    total = sum(service.totals.values())
    expected = sum(100 + i for i in range(2 * ORDERS_PER_VERSION))
    print(f"read {service.orders} orders of {len(service.totals)} customers, total {total}")
    print(f"dead letters: {service.dead_letters}")
    assert total == expected, (total, expected)
    print("all orders read as Order v1, the two bad records skipped")


@contextmanager
def services() -> Iterator[tuple[str, str]]:
    """The broker and registry to use: the environment's, else local ones started here."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    registry = os.environ.get("SCHEMA_REGISTRY_URL")
    with ExitStack() as stack:
        if not bootstrap:
            from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

            bootstrap = stack.enter_context(LocalKafka(security=PLAINTEXT_ONLY)).bootstrap_servers
            print(f"started Kafka at {bootstrap}")
        if not registry:
            from aiokproto.testing.schema_registry import LocalSchemaRegistry

            registry = stack.enter_context(LocalSchemaRegistry()).url
            print(f"started the schema registry at {registry}")
        yield bootstrap, registry


def main() -> None:
    with services() as (bootstrap, registry):
        asyncio.run(serve(bootstrap, registry))


if __name__ == "__main__":
    main()
