"""Avro serdes through a real broker and a real registry (Apicurio, the ``schema_registry``
fixture): round trip, key and value, subject strategies, evolution under BACKWARD and
FORWARD, and the typed errors a consumer sees."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aiokproto import Consumer, Producer
from aiokproto.consumer.errors import RecordDeserializationError
from aiokproto.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    IncompatibleSchemaError,
    NotWireFormatError,
    Schema,
    SchemaMismatchError,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from tests.producer.helpers import FAST, create_topic
from tests.schema_registry.helpers import ORDER_NO_DEFAULT, ORDER_V1, ORDER_V2, registry_conf

pytest.importorskip("fastavro")

KEY_SCHEMA = json.dumps({"type": "string"})


async def read_all(kafka: Any, topic: str, count: int, **options: Any) -> list[Any]:
    got: list[Any] = []
    async with Consumer(
        topic, bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest", **options
    ) as c:
        async with asyncio.timeout(30):
            while len(got) < count:
                batch = await c.getmany(timeout_ms=1000)
                got += [r for recs in batch.values() for r in recs]
    return got


async def test_avro_round_trip_key_and_value(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            key_serializer=AvroSerializer(sr, KEY_SCHEMA),
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            for i in range(5):
                await p.send(topic_name, {"id": i, "amount": i * 1.5}, key=f"k{i}")
            await p.send_batch(topic_name, [{"id": 5, "amount": 0.5}], keys=["k5"])
            await p.flush()
        # the registry is the session's: other tests' subjects are there too
        subjects = set(await sr.get_subjects())
        assert {f"{topic_name}-key", f"{topic_name}-value"} <= subjects, subjects
        records = await read_all(
            kafka,
            topic_name,
            6,
            key_deserializer=AvroDeserializer(sr),
            value_deserializer=AvroDeserializer(sr),
        )
    assert [(r.key, r.value) for r in records] == [
        (f"k{i}", {"id": i, "amount": i * 1.5}) for i in range(5)
    ] + [("k5", {"id": 5, "amount": 0.5})]


async def test_record_strategies_name_the_subject(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        by_record = AvroSerializer(
            sr, ORDER_V1, conf={"subject.name.strategy": record_subject_name_strategy}
        )
        by_topic_record = AvroSerializer(
            sr, ORDER_V1, conf={"subject.name.strategy": topic_record_subject_name_strategy}
        )
        for ser in (by_record, by_topic_record):
            async with Producer(
                bootstrap_servers=kafka.bootstrap_servers, value_serializer=ser, **FAST
            ) as p:
                await p.send_and_wait(topic_name, {"id": 1, "amount": 1.0})
        subjects = await sr.get_subjects()
    assert "shop.Order" in subjects
    assert f"{topic_name}-shop.Order" in subjects
    assert f"{topic_name}-value" not in subjects


async def test_backward_evolution_new_reader_reads_old_records(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    subject = f"{topic_name}-value"
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        await sr.register_schema(subject, Schema(ORDER_V1))
        await sr.set_compatibility(subject, "BACKWARD")
        # a new field without a default breaks BACKWARD: refused, typed
        with pytest.raises(IncompatibleSchemaError):
            await sr.register_schema(subject, Schema(ORDER_NO_DEFAULT))
        assert not await sr.test_compatibility(subject, Schema(ORDER_NO_DEFAULT))
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            await p.send_and_wait(topic_name, {"id": 1, "amount": 2.0})
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V2),
            **FAST,
        ) as p:
            await p.send_and_wait(topic_name, {"id": 2, "amount": 3.0, "note": "new"})
        assert await sr.get_versions(subject) == [1, 2]
        # a consumer on v2 reads both: the v1 record gets the default
        records = await read_all(
            kafka, topic_name, 2, value_deserializer=AvroDeserializer(sr, ORDER_V2)
        )
    assert [r.value for r in records] == [
        {"id": 1, "amount": 2.0, "note": ""},
        {"id": 2, "amount": 3.0, "note": "new"},
    ]


async def test_forward_evolution_old_reader_reads_new_records(
    kafka: Any, schema_registry: Any, topic_name: str
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    subject = f"{topic_name}-value"
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        await sr.register_schema(subject, Schema(ORDER_V1))
        await sr.set_compatibility(subject, "FORWARD")
        assert await sr.get_compatibility(subject) == "FORWARD"
        # use.latest.version: the serializer writes with what the subject holds now
        await sr.register_schema(subject, Schema(ORDER_V2))
        latest = AvroSerializer(
            sr, ORDER_V2, conf={"auto.register.schemas": False, "use.latest.version": True}
        )
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers, value_serializer=latest, **FAST
        ) as p:
            await p.send_and_wait(topic_name, {"id": 7, "amount": 1.0, "note": "n"})
        # a consumer still on v1 reads v2 records: the new field is dropped
        records = await read_all(
            kafka, topic_name, 1, value_deserializer=AvroDeserializer(sr, ORDER_V1)
        )
    assert records[0].value == {"id": 7, "amount": 1.0}


async def test_bad_records_fail_typed(kafka: Any, schema_registry: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name)
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            value_serializer=AvroSerializer(sr, ORDER_V1),
            **FAST,
        ) as p:
            with pytest.raises(SchemaMismatchError) as info:
                await p.send(topic_name, {"id": "one", "amount": 1.0})
            assert info.value.path == "shop.Order.id"
            await p.send_and_wait(topic_name, {"id": 1, "amount": 1.0})
        # a record not in the wire format, written by a plain producer
        async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as p:
            await p.send_and_wait(topic_name, b"plain bytes")
        async with Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(sr),
        ) as c:
            good = await c.getone()
            assert good.value == {"id": 1, "amount": 1.0}
            # the bad record stops its partition, again and again, until a seek past it
            for _ in range(2):
                with pytest.raises(RecordDeserializationError) as bad:
                    async with asyncio.timeout(10):
                        await c.getone()
                assert isinstance(bad.value.cause, NotWireFormatError)
                assert bad.value.offset == 1


async def test_full_compatibility_takes_only_fields_with_defaults(
    schema_registry: Any, topic_name: str
) -> None:
    subject = f"{topic_name}-value"
    async with SchemaRegistryClient(registry_conf(schema_registry.url)) as sr:
        await sr.register_schema(subject, Schema(ORDER_V2))
        await sr.set_compatibility(subject, "FULL")
        # dropping a field that has a default keeps FULL; adding one without breaks it
        assert await sr.test_compatibility(subject, Schema(ORDER_V1))
        assert not await sr.test_compatibility(subject, Schema(ORDER_NO_DEFAULT))
        with pytest.raises(IncompatibleSchemaError):
            await sr.register_schema(subject, Schema(ORDER_NO_DEFAULT))
        assert await sr.register_schema(subject, Schema(ORDER_V1)) > 0
        assert await sr.get_versions(subject) == [1, 2]


async def test_writers_racing_to_register_a_new_subject_all_get_its_id(
    schema_registry: Any, topic_name: str
) -> None:
    # Spark tasks and service replicas each have their own client: the first
    # records of a new topic register its subject from many clients at once.
    # Apicurio answers the losers 409 "already exists"; they must get the id.
    subject = f"{topic_name}-value"
    clients = [SchemaRegistryClient(registry_conf(schema_registry.url)) for _ in range(8)]
    try:
        for round_ in range(5):
            name = f"{subject}-{round_}"
            schema = Schema(ORDER_V1)
            ids = await asyncio.gather(*[c.register_schema(name, schema) for c in clients])
            assert len(set(ids)) == 1, ids
            assert (await clients[0].lookup_schema(name, Schema(ORDER_V1))).schema_id == ids[0]
        # a schema that really is incompatible is still refused, typed
        await clients[0].set_compatibility(f"{subject}-0", "BACKWARD")
        with pytest.raises(IncompatibleSchemaError):
            await clients[1].register_schema(f"{subject}-0", Schema(ORDER_NO_DEFAULT))
    finally:
        for c in clients:
            await c.close()
