"""A share consumer with a registry deserializer: records come out as dicts, and a
record not in the wire format is released with a typed error while the others flow."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Producer
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    NotWireFormatError,
    SchemaRegistryClient,
)
from aiokproto.share import ShareConsumer
from tests.consumer.conftest import create_topic
from tests.producer.helpers import FAST
from tests.schema_registry.helpers import ORDER_V1, registry_conf
from tests.share.conftest import configure_share_group

pytest.importorskip("fastavro")


async def test_share_consumer_deserializes_with_the_registry(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    group = f"s-{topic_name}"
    await configure_share_group(kafka.bootstrap_servers, group)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            await p.send(topic_name, {"id": 1, "amount": 1.0})
            await p.flush()
        async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
            await p.send_and_wait(topic_name, b"not framed")
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            await p.send_and_wait(topic_name, {"id": 3, "amount": 3.0})
        got: list[Any] = []
        errors: list[RecordDeserializationError] = []
        async with ShareConsumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=group,
            value_deserializer=AvroDeserializer(sr),
        ) as c:
            async with asyncio.timeout(30):
                while len(got) < 2 or not errors:
                    try:
                        batch = await c.getmany(timeout_ms=500)
                    except RecordDeserializationError as exc:
                        errors.append(exc)
                        continue
                    got += [r.value for recs in batch.values() for r in recs]
    assert got == [{"id": 1, "amount": 1.0}, {"id": 3, "amount": 3.0}]
    assert errors[0].offset == 1 and isinstance(errors[0].cause, NotWireFormatError)
