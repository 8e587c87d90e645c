"""The registry under load and going away: 1,000 concurrent sends with a cold cache
register each schema once; with the registry stopped a serializer that needs it fails
with ``RegistryUnreachableError`` (naming the URL) while a warm one keeps sending, and
everything recovers once the registry is back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Producer
from aiokproto.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    RegistryUnreachableError,
    SchemaRegistryClient,
)
from aiokproto.serialization import MessageField, SerializationContext
from tests.producer.helpers import FAST, create_topic
from tests.schema_registry.helpers import ORDER_V1, CountingTransport, registry_conf

pytest.importorskip("fastavro")


async def test_1000_concurrent_sends_register_the_schema_once(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    counting = CountingTransport()
    async with SchemaRegistryClient(registry_conf(schema_registry.url), transport=counting) as sr:
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            key_serializer=AvroSerializer(sr, '"string"'),
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            handles = await asyncio.gather(
                *[p.send(topic_name, {"id": i, "amount": 1.0}, key=str(i)) for i in range(1000)]
            )
            metadata = await asyncio.gather(*handles)
    # one registration per subject (key and value), not one per waiting send
    assert counting.matching("POST", "/versions") == 2, counting.counts
    # records of the partition keep the order of the send() calls
    offsets = [m.offset for m in metadata]
    assert offsets == sorted(offsets) and len(set(offsets)) == 1000


async def test_registry_going_away_gives_typed_errors_then_recovers(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    other_topic = topic_name + "-b"
    await create_topic(kafka.bootstrap_servers, other_topic)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        ser = AvroSerializer(sr, ORDER_V1)
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers, value_serializer=ser, **FAST
        ) as p:
            await p.send_and_wait(topic_name, {"id": 1, "amount": 1.0})  # warm: id cached
            written = await ser(dict(id=2, amount=2.0), ctx)
            schema_registry.stop()
            # the warm subject needs no registry
            await p.send_and_wait(topic_name, {"id": 3, "amount": 3.0})
            # a cold subject does: typed, with the URL, and nothing buffered
            with pytest.raises(RegistryUnreachableError) as info:
                await p.send(other_topic, {"id": 4, "amount": 4.0})
            assert schema_registry.url in str(info.value)
            assert info.value.urls == (schema_registry.url,)
            # ids the client knows need no registry; a cold client must ask for them
            assert await AvroDeserializer(sr)(written, ctx) == {"id": 2, "amount": 2.0}
            async with SchemaRegistryClient(registry_conf(schema_registry.url)) as cold:
                with pytest.raises(RegistryUnreachableError):
                    await AvroDeserializer(cold)(written, ctx)
            schema_registry.start()  # same port, in-memory storage: empty again
            md = await p.send_and_wait(other_topic, {"id": 4, "amount": 4.0})
            assert md.offset == 0
        assert await sr.get_subjects() == [f"{other_topic}-value"]
