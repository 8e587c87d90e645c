"""valueFormat avro/json on the sink, against the real broker and the tests' Apicurio
registry: struct rows written with the registry's serializers read back by the
source's valueFormat, and the driver-side errors (a binary column, a row that does
not match the schema, with its field path)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("jsonschema")

from aiokproto.testing.schema_registry import LocalSchemaRegistry
from tests.spark.helpers import read, write

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def test_avro_struct_rows_round_trip_through_the_registry(
    spark: Any, bootstrap: str, schema_registry: LocalSchemaRegistry, topic_name: str
) -> None:
    url = schema_registry.url
    df = spark.createDataFrame(
        [(1, {"a": "x"}, None), (2, {"b": "y"}, "n2")],
        "id long, tags map<string,string>, note string",
    ).selectExpr("CAST(id AS STRING) AS key", "struct(id, tags, note) AS value")
    # the schema given is registered under <topic>-value (confluent's default)
    write(df, bootstrap, url, topic=topic_name, valueFormat="avro", valueSchema=json.dumps(ORDER))
    # then the subject's latest version, nothing given
    write(df.where("key = '1'"), bootstrap, url, topic=topic_name, valueFormat="avro")
    back = read(spark, bootstrap, url, subscribe=topic_name, valueFormat="avro")
    assert back.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,tags:map<string,string>,note:string>"
    )
    rows = [(r.key, r.value.id, r.value.tags, r.value.note) for r in back.collect()]
    assert sorted(rows, key=repr) == [
        (b"1", 1, {"a": "x"}, None),
        (b"1", 1, {"a": "x"}, None),
        (b"2", 2, {"b": "y"}, "n2"),
    ]
    # the bytes are Confluent's wire format: confluent-kafka's own deserializer reads them
    ck = pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka.schema_registry import SchemaRegistryClient as CkClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    raw = (
        spark.read.format("aiokproto")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic_name)
        .load()
        .where("key = '2'")
        .collect()
    )
    decode = ck.AvroDeserializer(CkClient({"url": url}))
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    assert decode(bytes(raw[0].value), ctx) == {"id": 2, "tags": {"b": "y"}, "note": "n2"}


def test_sink_format_errors_are_typed_and_say_where(
    spark: Any, bootstrap: str, schema_registry: LocalSchemaRegistry, topic_name: str
) -> None:
    url = schema_registry.url
    binary = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match="binary") as info:
        write(
            binary,
            bootstrap,
            url,
            topic=topic_name,
            valueFormat="avro",
            valueSchema=json.dumps(ORDER),
        )
    assert "KafkaConfigError" in str(info.value)
    with pytest.raises(Exception, match=r"unknown option.*valuefromat"):
        write(binary, bootstrap, url, topic=topic_name, valueFromat="avro")
    # a row whose field does not match: the serializer's error names the field path
    bad = spark.createDataFrame([("one",)], "id string").selectExpr(
        "struct(id, map('a', 'b') AS tags) AS value"
    )
    with pytest.raises(Exception, match=r"Order\.id") as info:
        write(
            bad, bootstrap, url, topic=topic_name, valueFormat="avro", valueSchema=json.dumps(ORDER)
        )
    assert "SchemaMismatchError" in str(info.value)
