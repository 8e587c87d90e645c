"""AvroSerializer's mismatch errors without a server (a mock registry): the field
path where a record breaks its schema, and the schema named in a few words."""

from __future__ import annotations

import json
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastavro")

from aiokproto.schema_registry import (  # noqa: E402
    AvroDeserializer,
    AvroSerializer,
    SchemaMismatchError,
    SchemaRegistryClient,
)
from aiokproto.serialization import MessageField, SerializationContext  # noqa: E402

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "note", "type": ["null", "string"], "default": None},
            {
                "name": "line",
                "type": [
                    "null",
                    {"type": "record", "name": "Line", "fields": [{"name": "qty", "type": "int"}]},
                ],
                "default": None,
            },
        ],
    }
)


@pytest.mark.parametrize(
    ("record", "path", "message"),
    [
        # before: "at Order.line: {'qty': 'two'} is not null" (the union's first branch)
        (
            {"line": {"qty": "two"}},
            "Order.line.Line.qty",
            "at Order.line.Line.qty: 'two' is not int",
        ),
        ({"note": 5}, "Order.note", "at Order.note: 5 is not null or string"),
        # before: the whole parsed schema, fastavro's own keys included
        (5, "", "at $: 5 is not record Order"),
    ],
)
async def test_a_mismatch_names_the_deepest_path_and_the_schema_briefly(
    record: Any, path: str, message: str
) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"id": 1}))
    async with SchemaRegistryClient({"url": "http://a:1"}, transport=transport) as sr:
        ser = AvroSerializer(sr, SCHEMA)
        with pytest.raises(SchemaMismatchError) as info:
            await ser(record, SerializationContext("t", MessageField.VALUE))
    assert info.value.path == path
    assert message in str(info.value) and "__fastavro" not in str(info.value)


async def test_a_reader_schema_that_cannot_read_the_writers_is_a_mismatch() -> None:
    # fastavro's own SchemaResolutionError escaped the deserializer before
    def field(kind: str) -> str:
        return json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": kind}]})

    def handler(request: Any) -> Any:
        if request.url.path == "/schemas/ids/1":
            return httpx.Response(200, json={"schema": field("string")})
        return httpx.Response(200, json={"id": 1})

    ctx = SerializationContext("t", MessageField.VALUE)
    transport = httpx.MockTransport(handler)
    async with SchemaRegistryClient({"url": "http://a:1"}, transport=transport) as sr:
        data = await AvroSerializer(sr, field("string"))({"a": "x"}, ctx)
        with pytest.raises(SchemaMismatchError, match="cannot be read with the reader schema"):
            await AvroDeserializer(sr, field("int"))(data, ctx)
