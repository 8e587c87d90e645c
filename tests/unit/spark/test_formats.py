"""The source's keyFormat/valueFormat options (typos and missing pieces are clear
errors on the driver), Avro and JSON Schema to Spark types, and a registry nobody
answers failing fast with its typed error."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("httpx")
pytest.importorskip("fastavro")

from pyspark.sql import types as t

from aiokproto.errors import KafkaConfigError
from aiokproto.schema_registry import RegistryUnreachableError
from aiokproto.spark import formats
from aiokproto.spark.options import parse_source_options
from aiokproto.testing.ports import free_ports

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "orders"}


def parse(**options: str) -> Any:
    return parse_source_options({**BASE, **options})


def test_value_format_parses_and_defaults_the_subject_to_topic_value() -> None:
    got = parse(valueFormat="avro", **{"schema.registry.url": "http://r:1"}).formats
    assert got == formats.Formats(
        {"url": "http://r:1"}, None, formats.ColumnRequest("value", "avro", "orders-value", None)
    )
    assert parse().formats is None  # binary: nothing changes
    key = parse(
        keyFormat="JSON", keySchema='{"type": "string"}', **{"schema.registry.url": "http://r:1"}
    ).formats
    assert key.key == formats.ColumnRequest("key", "json", None, '{"type": "string"}')


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"valueFormat": "avor"}, "valueFormat must be one of binary, avro, json, not 'avor'"),
        ({"valueFormat": "protobuf"}, "ProtobufDeserializer"),
        ({"valueFormat": "avro"}, "needs the option schema.registry.url"),
        ({"valueSubjekt": "x"}, "unknown option(s) for the aiokproto source: valuesubjekt"),
        ({"schema.registry.urll": "http://r:1", "valueFormat": "avro"}, "'urll'"),
        ({"schema.registry.url": "http://r:1"}, "keyFormat and valueFormat are binary"),
        ({"valueSubject": "s"}, "valueSubject needs valueFormat avro or json"),
        (
            {"valueFormat": "avro", "valueSubject": "s", "valueSchema": '"int"'},
            "give valueSubject or valueSchema, not both",
        ),
        (
            {"valueFormat": "avro", "schema.registry.timeout": "soon"},
            "schema.registry.timeout must be a number",
        ),
        (
            {"subscribe": "a,b", "valueFormat": "json", "schema.registry.url": "http://r:1"},
            "give valueSubject",
        ),
    ],
)
def test_bad_format_options_are_clear(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaConfigError) as info:
        parse(**options)
    assert message in str(info.value)


def test_a_pattern_needs_a_subject_and_a_sink_refuses_registry_options() -> None:
    with pytest.raises(KafkaConfigError, match="give valueSubject"):
        parse_source_options(
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribePattern": "o.*",
                "valueFormat": "avro",
                "schema.registry.url": "http://r:1",
            }
        )
    from aiokproto.spark.options import parse_sink_options

    with pytest.raises(KafkaConfigError, match="keyFormat and valueFormat are binary"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "schema.registry.url": "http://r"})


def _avro(schema: Any) -> Any:
    import fastavro

    named: dict[str, Any] = {}
    return formats.avro_to_spark(fastavro.parse_schema(schema, named_schemas=named), named)


def test_avro_types_as_spark_maps_them() -> None:
    inner = {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}
    schema = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "n", "type": "int"},
            {"name": "ok", "type": "boolean"},
            {"name": "f", "type": "float"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "lines", "type": {"type": "array", "items": inner}},
            {"name": "again", "type": ["null", "Line"], "default": None},  # by name
            {"name": "tags", "type": {"type": "map", "values": "double"}},
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "raw", "type": {"type": "fixed", "name": "F", "size": 2}},
        ],
    }
    line = t.StructType([t.StructField("sku", t.StringType(), False)])
    assert _avro(schema) == t.StructType(
        [
            t.StructField("id", t.LongType(), False),
            t.StructField("n", t.IntegerType(), False),
            t.StructField("ok", t.BooleanType(), False),
            t.StructField("f", t.FloatType(), False),
            t.StructField("note", t.StringType(), True),
            t.StructField("lines", t.ArrayType(line, False), False),
            t.StructField("again", line, True),
            t.StructField("tags", t.MapType(t.StringType(), t.DoubleType(), False), False),
            t.StructField("kind", t.StringType(), False),
            t.StructField("at", t.TimestampType(), False),
            t.StructField("day", t.DateType(), False),
            t.StructField("price", t.DecimalType(9, 2), False),
            t.StructField("raw", t.BinaryType(), False),
        ]
    )
    assert _avro("string") == t.StringType()


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (["int", "string"], "the Avro union"),
        (
            {
                "type": "record",
                "name": "Node",
                "fields": [{"name": "next", "type": ["null", "Node"]}],
            },
            "recursive",
        ),
        ({"type": "string", "logicalType": "uuid"}, "uuid"),
    ],
)
def test_avro_types_without_a_column_type_are_refused(schema: Any, message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message) as info:
        _avro(schema)
    assert "binary" in str(info.value)  # says what to do instead


def test_json_schema_types() -> None:
    schema = {
        "type": "object",
        "title": "Order",
        "properties": {
            "id": {"type": "integer"},
            "amount": {"type": "number"},
            "note": {"type": ["null", "string"]},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
            "tags": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "kind": {"enum": ["a", "b"]},
            "ext": {"$ref": "ext.json"},
        },
        "$defs": {"line": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    }
    refs = {"ext.json": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    got = formats.json_to_spark(schema, schema, refs)
    line = t.StructType([t.StructField("sku", t.StringType())])
    assert got == t.StructType(
        [
            t.StructField("id", t.LongType()),
            t.StructField("amount", t.DoubleType()),
            t.StructField("note", t.StringType()),
            t.StructField("lines", t.ArrayType(line)),
            t.StructField("tags", t.MapType(t.StringType(), t.BooleanType())),
            t.StructField("kind", t.StringType()),
            t.StructField("ext", t.StructType([t.StructField("x", t.LongType())])),
        ]
    )
    for bad, message in [
        ({"type": "object"}, "free-form"),
        ({"$ref": "#/nowhere"}, "nothing there"),
        ({"$ref": "other.json"}, "not a registered reference"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
    ]:
        with pytest.raises(KafkaConfigError, match=message):
            formats.json_to_spark(bad, bad, {})


def test_an_unreachable_registry_fails_the_driver_fast_with_its_url() -> None:
    (port,) = free_ports(1)  # nothing listens there
    url = f"http://127.0.0.1:{port}"
    parsed = parse(
        valueFormat="avro",
        **{"schema.registry.url": url, "schema.registry.max.retries": "1"},
    )
    started = time.monotonic()
    with pytest.raises(RegistryUnreachableError, match=f"127.0.0.1:{port}"):
        formats.resolve(parsed.formats)
    assert time.monotonic() - started < 5


def test_typed_batch_matches_the_spark_schema() -> None:
    import pyarrow as pa

    from aiokproto.structs import ConsumerRecord

    value = t.StructType(
        [t.StructField("id", t.LongType()), t.StructField("at", t.TimestampType())]
    )
    fmt = formats.Formats(
        {"url": "http://r"},
        None,
        formats.Column("value", "avro", '"x"', (), value.json()),
    )
    key_type, value_type = formats.arrow_types(fmt)
    assert key_type is None
    import datetime as dt

    at = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    records = [
        ConsumerRecord("t", 0, 5, 1000, 0, b"k", {"id": 1, "at": at}, ()),
        ConsumerRecord("t", 0, 6, 2000, 0, None, None, ()),
    ]
    batch = formats.to_typed_batch("t", 0, records, False, key_type, value_type)
    from aiokproto.spark import arrow

    spark_schema = formats.typed_schema(False, fmt)
    assert batch.schema == _spark_arrow_schema(spark_schema)
    value_arrow = pa.struct(
        [pa.field("id", pa.int64()), pa.field("at", pa.timestamp("us", tz="UTC"))]
    )
    assert batch.schema == pa.schema(
        [pa.field("value", value_arrow) if f.name == "value" else f for f in arrow.SCHEMA]
    )
    assert batch.column("value").to_pylist() == [{"id": 1, "at": at}, None]
    assert batch.column("key").to_pylist() == [b"k", None]
    assert json.loads(fmt.value.spark_type_json) == json.loads(value.json())  # type: ignore[union-attr]
    assert pa.types.is_struct(value_type)
    with_headers = formats.to_typed_batch(
        "t", 0, [r._replace(headers=(("h", b"1"),)) for r in records], True, None, value_type
    )
    assert with_headers.schema == _spark_arrow_schema(formats.typed_schema(True, fmt))
    assert with_headers.column("headers").to_pylist()[0] == [{"key": "h", "value": b"1"}]


def _spark_arrow_schema(schema: Any) -> Any:
    """pyspark's own Arrow form of ``schema`` (the signature moved between versions)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)


def test_arrow_types_are_sparks_down_to_nested_nullability() -> None:
    # Spark compares each batch's schema with its own Arrow form, "not null" included:
    # a map's values were nullable here while Spark wanted them not (a failed read)
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    line = t.StructType([t.StructField("qty", t.IntegerType(), False)])
    dtype = t.StructType(
        [
            t.StructField("tags", t.MapType(t.StringType(), t.StringType(), False), False),
            t.StructField("maybe", t.MapType(t.StringType(), t.LongType(), True)),
            t.StructField("lines", t.ArrayType(line, False), False),
            t.StructField("day", t.DateType()),
            t.StructField("at", t.TimestampType()),
            t.StructField("local", t.TimestampNTZType()),
            t.StructField("price", t.DecimalType(9, 2)),
            t.StructField("f", t.FloatType()),
            t.StructField("ok", t.BooleanType()),
            t.StructField("raw", t.BinaryType()),
        ]
    )
    import inspect

    tz = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_type).parameters else {}

    def text(arrow: Any) -> str:
        return str(pa.schema([pa.field("v", arrow)]).to_string())

    assert text(formats.arrow_type(dtype)) == text(to_arrow_type(dtype, **tz))


# -- the sink ----------------------------------------------------------------------------

SINK = {"kafka.bootstrap.servers": "127.0.0.1:9", "schema.registry.url": "http://r:1"}


def sink(**options: str) -> Any:
    from aiokproto.spark.options import parse_sink_options

    return parse_sink_options({**SINK, **options}).formats


def test_sink_formats_default_to_the_topic_subject_or_the_rows_topics() -> None:
    f = sink(topic="orders", valueFormat="avro")
    assert f.value == formats.ColumnRequest("value", "avro", "orders-value", None)
    assert f.key is None
    # a schema given and no subject: registered under each row's <topic>-value
    f = sink(valueFormat="json", valueSchema="{}")
    assert f.value == formats.ColumnRequest("value", "json", None, "{}")
    f = sink(topic="o", keyFormat="avro", keySubject="ids")
    assert f.key == formats.ColumnRequest("key", "avro", "ids", None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"valueFormat": "avro"}, "without the topic option: give valueSchema"),
        ({"topic": "o", "valueFormat": "avro", "schema.registry.url": ""}, "bad|url|http"),
        ({"topic": "o", "valueFormat": "xml"}, "must be one of binary, avro, json"),
        ({"topic": "o", "valueSubject": "s"}, "needs valueFormat avro or json"),
        ({"topic": "o", "valueFormat": "avro", "valueSchma": "{}"}, "unknown option.*valueschma"),
    ],
)
def test_bad_sink_format_options_are_clear(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message):
        sink(**options)


def test_sink_values_become_the_dicts_the_serializers_take() -> None:
    import pyarrow as pa

    dtype = pa.struct(
        [
            pa.field("id", pa.int64()),
            pa.field("tags", pa.map_(pa.string(), pa.string())),
            pa.field(
                "lines", pa.list_(pa.struct([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
            ),
        ]
    )
    column = pa.array(
        [
            {"id": 1, "tags": [("a", "x")], "lines": [{"m": [("q", 2)]}]},
            None,
            {"id": 2, "tags": None, "lines": []},
        ],
        dtype,
    )
    assert formats.column_values(column) == [
        {"id": 1, "tags": {"a": "x"}, "lines": [{"m": {"q": 2}}]},
        None,
        {"id": 2, "tags": None, "lines": []},
    ]
    # without maps anywhere: to_pylist's own dicts
    plain = pa.array([{"id": 3}], pa.struct([pa.field("id", pa.int64())]))
    assert formats.column_values(plain) == [{"id": 3}]


def test_sink_row_objects_keep_typed_values_for_the_serializers() -> None:
    from pyspark.sql import Row

    from aiokproto.spark.sink import row_records

    rows = [Row(key="k", value=Row(id=1, tags={"a": "x"}))]
    assert list(row_records(rows)) == [(None, None, b"k", {"id": 1, "tags": {"a": "x"}}, None)]


def test_an_unreachable_registry_fails_the_sink_on_the_driver_with_its_url() -> None:
    (port,) = free_ports(1)
    f = sink(
        topic="o",
        valueFormat="avro",
        **{"schema.registry.url": f"http://127.0.0.1:{port}", "schema.registry.max.retries": "1"},
    )
    with pytest.raises(RegistryUnreachableError, match=f"127.0.0.1:{port}"):
        formats.resolve_sink(f)
