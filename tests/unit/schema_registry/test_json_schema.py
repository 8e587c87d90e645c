"""JSONDeserializer without a server (a reader schema only): a payload that is not
JSON, however malformed, is a typed SchemaMismatchError."""

from __future__ import annotations

import pytest

pytest.importorskip("jsonschema")

from aiokproto.schema_registry import JSONDeserializer, SchemaMismatchError
from aiokproto.schema_registry.serde import frame
from aiokproto.serialization import MessageField, SerializationContext


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xfe",
        b"{",
        b"[" * 100_000,  # a RecursionError escaped before
        b"1" * 5000,  # past Python's int digit limit
    ],
)
async def test_a_payload_that_is_not_json_is_a_mismatch(payload: bytes) -> None:
    de = JSONDeserializer('{"type": "object"}')
    with pytest.raises(SchemaMismatchError, match="is not JSON"):
        await de(frame(1, payload), SerializationContext("t", MessageField.VALUE))
