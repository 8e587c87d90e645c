"""The wire format's frame and the subject name strategies."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")

from aiokproto.errors import KafkaConfigError
from aiokproto.schema_registry import (
    NotWireFormatError,
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from aiokproto.schema_registry.serde import SubjectIds, frame, unframe
from aiokproto.serialization import MessageField, SerializationContext


def test_frame_is_magic_zero_and_a_big_endian_id() -> None:
    data = frame(0x01020304, b"payload")
    assert data == b"\x00\x01\x02\x03\x04payload"
    schema_id, payload = unframe(data)
    assert schema_id == 0x01020304 and bytes(payload) == b"payload"


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", b"\x01\x00\x00\x00\x01x", b"{}"])
def test_not_wire_format_is_typed(data: bytes) -> None:
    with pytest.raises(NotWireFormatError, match="magic byte 0"):
        unframe(data)


def test_strategies() -> None:
    ctx = SerializationContext("orders", MessageField.VALUE)
    key_ctx = ctx._replace(field=MessageField.KEY)
    assert topic_subject_name_strategy(ctx, "shop.Order") == "orders-value"
    assert topic_subject_name_strategy(key_ctx, None) == "orders-key"
    assert record_subject_name_strategy(ctx, "shop.Order") == "shop.Order"
    assert topic_record_subject_name_strategy(ctx, "shop.Order") == "orders-shop.Order"
    for strategy in (record_subject_name_strategy, topic_record_subject_name_strategy):
        with pytest.raises(KafkaConfigError):
            strategy(ctx, None)


@pytest.mark.parametrize(
    "conf",
    [
        {"auto.register.schemas": "yes"},
        {"use.latest.version": True},  # with auto.register.schemas at its default True
        {"subject.name.strategy": "topic"},
        {"bogus": 1},
    ],
)
def test_bad_serializer_options_are_refused(conf: dict[str, object]) -> None:
    sr = SchemaRegistryClient({"url": "http://a:1"})
    with pytest.raises(KafkaConfigError):
        SubjectIds(sr, Schema('"string"'), None, conf)
