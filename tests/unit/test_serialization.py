"""aiokproto.serialization: which serializers take the context path, and the consumers'
in-order deserialization that stops at the first failing record."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from aiokproto import Consumer, Producer, ShareConsumer
from aiokproto.errors import KafkaConfigError
from aiokproto.producer.checks import SerializationError, _as_bytes
from aiokproto.serialization import (
    ContextDeserializer,
    ContextSerializer,
    MessageField,
    SerializationContext,
    deserialize_records,
    deserializers_in_context,
    in_context,
)
from aiokproto.structs import ConsumerRecord


class Upper(ContextSerializer[str]):
    async def serialize(self, data: str, ctx: SerializationContext) -> bytes:
        return f"{ctx.topic}/{ctx.field}/{data.upper()}".encode()


class Tagged(ContextDeserializer[str]):
    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> str:
        assert data is not None
        if data == b"bad":
            raise ValueError("bad record")
        return f"{ctx.field}:{data.decode()}:{dict(ctx.headers or [])}"


async def test_a_context_serializer_gets_topic_and_field() -> None:
    ctx = SerializationContext("t", MessageField.KEY)
    assert await Upper()("a", ctx) == b"t/key/A"


def test_only_context_objects_take_the_context_path() -> None:
    plain = str.encode
    assert in_context(plain, plain) is None
    assert in_context(None, None) is None
    up = Upper()
    assert in_context(plain, up) == (None, up)
    assert in_context(up, None) == (up, None)
    tagged = Tagged()
    assert deserializers_in_context(None, bytes) is None
    assert deserializers_in_context(tagged, bytes) == (tagged, None)


def record(offset: int, value: bytes | None, key: bytes | None = None) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("t", 0, offset, 0, 0, key, value, [("h", b"1")])


async def test_records_are_deserialized_in_order_up_to_the_first_failure() -> None:
    recs = [record(0, b"a", b"k"), record(1, None), record(2, b"bad"), record(3, b"d")]
    done, failed = await deserialize_records(Tagged(), Tagged(), recs)
    assert [(r.key, r.value) for r in done] == [
        ("key:k:{'h': b'1'}", "value:a:{'h': b'1'}"),
        (None, None),
    ]
    assert failed is not None and failed[0] == 2 and "bad record" in str(failed[1])
    done, failed = await deserialize_records(None, Tagged(), recs[:2])
    assert failed is None and done[0].key == b"k"


async def _async_ser(value: Any) -> bytes:
    return b"x"


class _AsyncCall:
    async def __call__(self, value: Any) -> bytes:
        return b"x"


@pytest.mark.parametrize("fn", [_async_ser, _AsyncCall(), functools.partial(_async_ser)])
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda fn: Producer(bootstrap_servers="h:1", value_serializer=fn), "value_serializer"),
        (lambda fn: Producer(bootstrap_servers="h:1", key_serializer=fn), "key_serializer"),
        (lambda fn: Consumer("t", bootstrap_servers="h:1", value_deserializer=fn), "value_des"),
        (lambda fn: Consumer("t", bootstrap_servers="h:1", key_deserializer=fn), "key_des"),
        (
            lambda fn: ShareConsumer(
                "t", bootstrap_servers="h:1", group_id="g", value_deserializer=fn
            ),
            "value_des",
        ),
    ],
)
def test_an_async_plain_serializer_is_refused_when_the_client_is_made(
    fn: Any, make: Any, name: str
) -> None:
    # called and never awaited: the consumer handed out coroutine objects as values
    # and the producer failed each send with "not coroutine; pass value_serializer="
    with pytest.raises(KafkaConfigError, match=f"{name}.* is an async function"):
        make(fn)


async def test_a_plain_serializer_returning_a_coroutine_says_so() -> None:
    coro = _async_ser(1)
    with pytest.raises(SerializationError, match="is a coroutine"):
        _as_bytes(coro, "value")
    assert coro.cr_frame is None  # closed: no "never awaited" warning
