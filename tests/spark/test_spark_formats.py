"""valueFormat avro/json on a local[2] SparkSession against the real broker and the
tests' Apicurio registry: typed struct columns, records of two schema versions read
as the latest, and records that cannot be decoded failing the query with the typed
error (a record not in the wire format)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("jsonschema")

from aiokproto import Producer
from aiokproto.schema_registry import (
    AvroSerializer,
    JSONSerializer,
    SchemaRegistryClient,
)
from aiokproto.testing.schema_registry import LocalSchemaRegistry
from tests.spark.helpers import read

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
        },
        {"name": "tags", "type": {"type": "map", "values": "string"}},
    ],
}
# v1 plus a nullable field with a default: v1 records read as v2 get null there
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
AT = dt.datetime(2026, 11, 28, 1, 2, 3, tzinfo=dt.UTC)


def _order(i: int, note: bool) -> dict[str, Any]:
    order: dict[str, Any] = {
        "id": i,
        "at": AT,
        "lines": [{"sku": f"s{i}", "qty": i}],
        "tags": {"n": str(i)},
    }
    if note:
        order["note"] = f"note {i}"
    return order


async def _produce(
    bootstrap: str, url: str, topic: str, batches: list[tuple[Any, list[Any]]]
) -> None:
    async with SchemaRegistryClient({"url": url}) as sr:
        async with Producer(bootstrap_servers=bootstrap) as p:
            for make, values in batches:
                ser = make(sr)
                for v in values:
                    payload = await ser(v, _ctx(topic)) if ser is not None else v
                    await p.send(topic, payload)
            await p.flush()


def _ctx(topic: str) -> Any:
    from aiokproto.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


def test_avro_values_are_typed_columns_across_versions(
    spark: Any, bootstrap: str, schema_registry: LocalSchemaRegistry, topic_name: str
) -> None:
    url = schema_registry.url
    v1 = [_order(i, note=False) for i in range(3)]
    v2 = [_order(i, note=True) for i in range(3, 5)]
    asyncio.run(
        _produce(
            bootstrap,
            url,
            topic_name,
            [
                (lambda sr: AvroSerializer(sr, json.dumps(ORDER_V1)), v1),
                (lambda sr: AvroSerializer(sr, json.dumps(ORDER_V2)), v2),
            ],
        )
    )
    df = read(spark, bootstrap, url, subscribe=topic_name, valueFormat="avro")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,at:timestamp,lines:array<struct<sku:string,qty:int>>,"
        "tags:map<string,string>,note:string>"
    )
    assert df.schema["key"].dataType.simpleString() == "binary"
    # one query: the struct's fields work in Spark expressions like any struct's
    rows = df.selectExpr("offset", "value", "value.lines[0].qty AS qty").collect()
    rows.sort(key=lambda r: r.offset)
    assert [r.value.id for r in rows] == [0, 1, 2, 3, 4]
    assert [r.value.note for r in rows] == [None, None, None, "note 3", "note 4"]
    assert [r.qty for r in rows] == [0, 1, 2, 3, 4]
    assert rows[4].value.lines[0].asDict() == {"sku": "s4", "qty": 4}
    assert rows[4].value.tags == {"n": "4"}
    assert rows[0].value.at.astimezone(dt.UTC) == AT


def test_json_values_are_typed_and_undecodable_records_fail_the_query(
    spark: Any, bootstrap: str, schema_registry: LocalSchemaRegistry, topic_name: str
) -> None:
    url = schema_registry.url
    schema = {
        "type": "object",
        "title": "Reading",
        "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
        "required": ["sensor"],
    }
    values = [{"sensor": "a", "value": 1.5}, {"sensor": "b", "value": 2}]
    asyncio.run(
        _produce(
            bootstrap,
            url,
            topic_name,
            [(lambda sr: JSONSerializer(json.dumps(schema), sr), values)],
        )
    )
    df = read(spark, bootstrap, url, subscribe=topic_name, valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == "struct<sensor:string,value:double>"
    assert [(r.value.sensor, r.value.value) for r in df.orderBy("offset").collect()] == [
        ("a", 1.5),
        ("b", 2.0),
    ]
    # a record not in the wire format (a schema id nobody registered: the example's test)
    asyncio.run(_produce(bootstrap, url, topic_name, [(lambda sr: None, [b"{}"])]))
    with pytest.raises(Exception, match="magic byte 0") as info:
        read(spark, bootstrap, url, subscribe=topic_name, valueFormat="json").collect()
    assert "NotWireFormatError" in str(info.value)
