"""Protobuf serdes through a real broker and registry: a message whose file imports
another (the import registered first and referenced), nested and second messages
(their indexes), and the bytes confluent-kafka's serdes write and read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.schema_registry import (
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaMismatchError,
    SchemaRegistryClient,
)
from aiokproto.serialization import MessageField, SerializationContext
from tests.producer.helpers import FAST, create_topic
from tests.schema_registry.helpers import protobuf_classes, registry_conf

pytest.importorskip("google.protobuf")


async def test_protobuf_round_trip_with_a_reference(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    classes = protobuf_classes()
    Order, Money = classes["Order"], classes["Money"]
    await create_topic(kafka.bootstrap_servers, topic_name)
    orders = [Order(id=i, total=Money(cents=100 * i)) for i in range(3)]
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        ser = ProtobufSerializer(Order, sr)
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers, value_serializer=ser, **FAST
        ) as p:
            for order in orders:
                await p.send(topic_name, order)
            with pytest.raises(SchemaMismatchError):
                await p.send(topic_name, Money(cents=1))
            await p.flush()
        assert "shop/money.proto" in await sr.get_subjects()
        latest = await sr.get_latest_version(f"{topic_name}-value")
        assert latest.schema.schema_type == "PROTOBUF"
        assert [r.subject for r in latest.schema.references] == ["shop/money.proto"]
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            value_deserializer=ProtobufDeserializer(Order),
        ) as c:
            async with asyncio.timeout(30):
                got = [(await c.getone()).value for _ in orders]
    assert got == orders


async def test_protobuf_same_bytes_as_confluent_kafka(
    schema_registry: Any, topic_name: str
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    ck_sr = pytest.importorskip("confluent_kafka.schema_registry")
    ck_pb = pytest.importorskip("confluent_kafka.schema_registry.protobuf")
    classes = protobuf_classes()
    theirs = ck_sr.SchemaRegistryClient({"url": schema_registry.url})
    their_ctx = ck.serialization.SerializationContext(
        topic_name, ck.serialization.MessageField.VALUE
    )
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        for name, message in [
            ("Refund", classes["Refund"](id=3)),
            ("Order.Line", classes["Order.Line"](sku="a-1")),
        ]:
            cls = classes[name]
            # one subject per message type here: the record strategy
            from confluent_kafka.schema_registry import record_subject_name_strategy as ck_rec

            from aiokproto.schema_registry import record_subject_name_strategy

            ours = await ProtobufSerializer(
                cls, sr, {"subject.name.strategy": record_subject_name_strategy}
            )(message, ctx)
            conf = {"use.deprecated.format": False, "subject.name.strategy": ck_rec}
            their_ser = ck_pb.ProtobufSerializer(cls, theirs, conf)
            their_bytes = await asyncio.to_thread(their_ser, message, their_ctx)
            assert ours == their_bytes, name
            their_de = ck_pb.ProtobufDeserializer(cls, {"use.deprecated.format": False})
            assert their_de(ours, their_ctx) == message
            assert await ProtobufDeserializer(cls)(their_bytes, ctx) == message
