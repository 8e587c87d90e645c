"""JSON Schema serdes through a real broker and registry: round trip, a record that
does not match (the JSON path in the error), and a reader schema check."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.schema_registry import (
    JSONDeserializer,
    JSONSerializer,
    SchemaMismatchError,
    SchemaRegistryClient,
    record_subject_name_strategy,
)
from aiokproto.serialization import MessageField, SerializationContext
from tests.producer.helpers import FAST, create_topic
from tests.schema_registry.helpers import ORDER_JSON, registry_conf

pytest.importorskip("jsonschema")


async def test_json_round_trip_and_mismatch_path(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    orders = [{"id": 1, "items": [{"sku": "a", "qty": 2}]}, {"id": 2, "items": []}]
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        ser = JSONSerializer(ORDER_JSON, sr)
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers, value_serializer=ser, **FAST
        ) as p:
            for order in orders:
                await p.send(topic_name, order)
            with pytest.raises(SchemaMismatchError) as info:
                await p.send(topic_name, {"id": 3, "items": [{"sku": "a"}, {"sku": 7}]})
            assert info.value.path == "$.items[1].sku"
            await p.flush()
        registered = await sr.get_latest_version(f"{topic_name}-value")
        assert registered.schema.schema_type == "JSON"
        ctx = SerializationContext(topic_name, MessageField.VALUE)
        # compact UTF-8 JSON behind the frame
        payload = await ser({"id": 9, "items": [{"sku": "é"}]}, ctx)
        assert payload is not None
        assert payload[5:] == '{"id":9,"items":[{"sku":"é"}]}'.encode()
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            value_deserializer=JSONDeserializer(ORDER_JSON, schema_registry_client=sr),
        ) as c:
            async with asyncio.timeout(30):
                got = [(await c.getone()).value for _ in orders]
        assert got == orders


async def test_json_reader_schema_refuses_what_it_cannot_take(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    strict = json.dumps(
        {"title": "Order", "type": "object", "properties": {"id": {"type": "string"}}}
    )
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        ser = JSONSerializer(
            ORDER_JSON, sr, conf={"subject.name.strategy": record_subject_name_strategy}
        )
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers, value_serializer=ser, **FAST
        ) as p:
            await p.send_and_wait(topic_name, {"id": 1})
        assert "Order" in await sr.get_subjects()
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            value_deserializer=JSONDeserializer(strict),
        ) as c:
            with pytest.raises(RecordDeserializationError) as info:
                async with asyncio.timeout(30):
                    await c.getone()
    assert isinstance(info.value.cause, SchemaMismatchError)
    assert info.value.cause.path == "$.id"
