"""The wire format's frame and the subject name strategies."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")

from aiokproto.errors import KafkaConfigError
from aiokproto.schema_registry import (
    NotWireFormatError,
    RegisteredSchema,
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
        SubjectIds(sr, Schema('"string"'), None, conf, _prepare)


async def _prepare(schema: Schema) -> str:
    return f"prepared {schema.schema_str}"


class _Registry:
    """What SubjectIds asks of a registry client, counted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def register_schema(self, subject: str, schema: Schema, normalize: bool) -> int:
        self.calls.append(("register", subject))
        return 7 if subject.endswith("-value") else 8

    async def get_latest_version(self, subject: str) -> RegisteredSchema:
        self.calls.append(("latest", subject))
        return RegisteredSchema(9, Schema('"long"'), subject, 3)


async def test_writer_is_fetched_once_then_cached_per_topic_and_field() -> None:
    reg = _Registry()
    ids: SubjectIds[str] = SubjectIds(reg, Schema('"string"'), None, None, _prepare)  # type: ignore[arg-type]
    ctx = SerializationContext("orders", MessageField.VALUE)
    assert ids.cached(ctx) is None  # nothing known yet: the serializer must await
    writer = await ids.writer(ctx)
    assert (writer.subject, writer.schema_id, writer.prepared) == (
        "orders-value",
        7,
        'prepared "string"',
    )
    assert writer.header == frame(7, b"")
    assert ids.cached(ctx) is writer and await ids.writer(ctx) is writer
    key_ctx = ctx._replace(field=MessageField.KEY)
    assert ids.cached(key_ctx) is None  # another field is another subject
    assert (await ids.writer(key_ctx)).schema_id == 8
    assert reg.calls == [("register", "orders-value"), ("register", "orders-key")]


async def test_custom_strategy_is_asked_per_record() -> None:
    reg = _Registry()
    seen: list[str] = []

    def by_header(ctx: SerializationContext, record_name: str | None) -> str:
        seen.append(ctx.topic)
        return f"{dict(ctx.headers or [])['kind'].decode()}-value"

    conf = {"subject.name.strategy": by_header}
    ids: SubjectIds[str] = SubjectIds(reg, Schema('"string"'), None, conf, _prepare)  # type: ignore[arg-type]
    a = SerializationContext("t", MessageField.VALUE, [("kind", b"a")])
    b = SerializationContext("t", MessageField.VALUE, [("kind", b"b")])
    assert (await ids.writer(a)).subject == "a-value"
    assert ids.cached(a) is not None and ids.cached(b) is None  # same topic, other subject
    assert (await ids.writer(b)).subject == "b-value"
    assert len(seen) >= 4  # asked each time, never cached by topic


async def test_latest_version_is_not_cached_by_the_serializer() -> None:
    reg = _Registry()
    conf = {"use.latest.version": True, "auto.register.schemas": False}
    ids: SubjectIds[str] = SubjectIds(reg, Schema('"string"'), None, conf, _prepare)  # type: ignore[arg-type]
    ctx = SerializationContext("orders", MessageField.VALUE)
    writer = await ids.writer(ctx)
    assert (writer.schema_id, writer.prepared) == (9, 'prepared "long"')
    assert ids.cached(ctx) is None  # the client's TTL decides when a new latest shows
    await ids.writer(ctx)
    assert reg.calls == [("latest", "orders-value")] * 2
