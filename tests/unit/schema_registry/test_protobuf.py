"""Protobuf message indexes: the path of a message in its file, zigzag-encoded."""

from __future__ import annotations

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("httpx")

from aiokproto.schema_registry import NotWireFormatError
from aiokproto.schema_registry.protobuf import (
    decode_indexes,
    encode_indexes,
    message_indexes,
)
from tests.schema_registry.helpers import protobuf_classes


def test_message_indexes_follow_the_file() -> None:
    classes = protobuf_classes()
    assert message_indexes(classes["Order"].DESCRIPTOR) == [0]
    assert message_indexes(classes["Order.Line"].DESCRIPTOR) == [0, 0]
    assert message_indexes(classes["Refund"].DESCRIPTOR) == [1]


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 0], b"\x04\x00\x00"), ([2, 70], b"\x04\x04\x8c\x01")],
)
def test_indexes_round_trip(indexes: list[int], encoded: bytes) -> None:
    assert encode_indexes(indexes) == encoded
    got, rest = decode_indexes(memoryview(encoded + b"body"))
    assert got == indexes and bytes(rest) == b"body"


@pytest.mark.parametrize(
    "data", [b"", b"\x04\x02", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]
)
def test_bad_indexes_are_typed(data: bytes) -> None:
    with pytest.raises(NotWireFormatError):
        decode_indexes(memoryview(data))
