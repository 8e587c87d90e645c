"""Byte-for-byte interop with confluent-kafka's serdes against the same registry: what
ours writes confluent-kafka's deserializers read, what theirs writes ours read, and
both write the same bytes for the same record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.schema_registry import AvroDeserializer, AvroSerializer, SchemaRegistryClient
from aiokproto.serialization import MessageField, SerializationContext
from tests.producer.helpers import FAST, consume, create_topic
from tests.schema_registry.helpers import ORDER_V1, registry_conf

pytest.importorskip("fastavro")
ck = pytest.importorskip("confluent_kafka")
ck_sr = pytest.importorskip(
    "confluent_kafka.schema_registry", reason="confluent-kafka's schema registry extra"
)
ck_avro = pytest.importorskip("confluent_kafka.schema_registry.avro")


async def test_avro_both_ways_through_the_broker(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    theirs = ck_sr.SchemaRegistryClient({"url": schema_registry.url})
    their_ser = ck_avro.AvroSerializer(theirs, ORDER_V1)
    their_de = ck_avro.AvroDeserializer(theirs)
    their_ctx = ck.serialization.SerializationContext(
        topic_name, ck.serialization.MessageField.VALUE
    )
    records = [{"id": i, "amount": i / 4} for i in range(5)]
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            for r in records:
                await p.send(topic_name, r)
            await p.flush()
        # ours -> theirs, through the broker
        raw = await asyncio.to_thread(consume, kafka.bootstrap_servers, topic_name, 5)
        assert [their_de(m.value(), their_ctx) for m in raw] == records
        # the same bytes: same subject, same schema id, same encoding
        their_bytes = [await asyncio.to_thread(their_ser, r, their_ctx) for r in records]
        assert their_bytes == [m.value() for m in raw]
        # theirs -> ours, through the broker
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for value in their_bytes:
            producer.produce(topic_name, value)
        await asyncio.to_thread(producer.flush, 30)
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(sr),
        ) as c:
            got = []
            async with asyncio.timeout(30):
                while len(got) < 10:
                    got.append((await c.getone()).value)
        ctx = SerializationContext(topic_name, MessageField.VALUE)
        assert got == records + records
        assert await AvroDeserializer(sr)(their_bytes[0], ctx) == records[0]


async def test_json_same_bytes_both_ways(schema_registry: Any, topic_name: str) -> None:
    ck_json = pytest.importorskip("confluent_kafka.schema_registry.json_schema")
    from aiokproto.schema_registry import JSONDeserializer, JSONSerializer
    from tests.schema_registry.helpers import ORDER_JSON

    theirs = ck_sr.SchemaRegistryClient({"url": schema_registry.url})
    their_ctx = ck.serialization.SerializationContext(
        topic_name, ck.serialization.MessageField.VALUE
    )
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    order = {"id": 5, "items": [{"sku": "ü", "qty": 1}]}
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        ours = await JSONSerializer(ORDER_JSON, sr)(order, ctx)
        their_ser = ck_json.JSONSerializer(ORDER_JSON, theirs)
        their_bytes = await asyncio.to_thread(their_ser, order, their_ctx)
        assert ours == their_bytes
        their_de = ck_json.JSONDeserializer(ORDER_JSON, schema_registry_client=theirs)
        assert their_de(ours, their_ctx) == order
        assert await JSONDeserializer(schema_registry_client=sr)(their_bytes, ctx) == order
