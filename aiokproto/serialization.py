"""Context-aware (and possibly async) serializers for the producer and consumers.

A plain ``key_serializer``/``value_serializer`` is ``f(data) -> bytes``: the hot path
calls it as it always has. An object of a ``ContextSerializer`` subclass is called
``await s(data, ctx)`` instead, with a ``SerializationContext`` (topic, key or value,
headers: what a schema registry serializer needs for its subject and may await a
registry look-up for). The producer tells the two apart once, at construction, so a
plain callable costs nothing more. Once a serializer has what it needs cached, its
``serialize_now(data, ctx)`` answers without a coroutine (``AWAIT`` until then), and
the producer takes its compiled path with the bytes. ``ContextDeserializer`` is the
consuming side: its ``deserialize(data, ctx)`` is a coroutine the consumers await
before handing records out, in order.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final, Generic, Literal, NamedTuple, TypeVar

from aiokproto.error_families import KafkaConfigError
from aiokproto.records.record import Header

T = TypeVar("T")

#: True inside a producer's own send() of a record its context serializers already
#: made bytes (per task: another task's send() still serializes)
serialized: ContextVar[bool] = ContextVar("aiokproto_serialized", default=False)


class MessageField(enum.StrEnum):
    """Which part of a record a serializer handles (confluent-kafka's name)."""

    KEY = "key"
    VALUE = "value"


class SerializationContext(NamedTuple):
    """What a context-aware serializer is told besides the data (confluent-kafka's)."""

    topic: str
    field: MessageField
    headers: Sequence[Header] | None = None


class Await(enum.Enum):
    """The type of ``AWAIT``."""

    AWAIT = "await"


#: what ``ContextSerializer.serialize_now`` answers when it must await (a registry
#: look-up): the caller awaits ``serialize`` instead
AWAIT: Final = Await.AWAIT


class ContextSerializer(Generic[T]):
    """Base of serializers called ``await s(data, ctx)`` (see the module docstring).

    Subclasses implement ``serialize``; ``None`` data never reaches it (a None key or
    value stays None, as with plain serializers). They may also implement
    ``serialize_now``, the same without awaiting, for when nothing needs awaiting.
    """

    def serialize_now(
        self, data: T, ctx: SerializationContext
    ) -> bytes | Literal[Await.AWAIT] | None:
        """``serialize``'s answer if it can be had without awaiting, else ``AWAIT``
        (the default: every record is awaited). Called first for every record: a
        registry serializer answers from its cache here, so a record costs no
        coroutine once its subject's schema id is known."""
        return AWAIT

    async def serialize(self, data: T, ctx: SerializationContext) -> bytes | None:
        raise NotImplementedError

    async def __call__(self, data: T, ctx: SerializationContext) -> bytes | None:
        return await self.serialize(data, ctx)


class ContextDeserializer(Generic[T]):
    """Base of deserializers called ``await d(data, ctx)`` by the consumers."""

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> T:
        raise NotImplementedError

    async def __call__(self, data: bytes | None, ctx: SerializationContext) -> T:
        return await self.deserialize(data, ctx)


def refuse_async_plain(name: str, value: object) -> None:
    """A plain (de)serializer is called, never awaited: an ``async def`` one would hand
    out coroutine objects (as record values, or as a record's "bytes"), so it is
    refused when the client is made, naming the way that awaits."""
    if value is None or isinstance(value, (ContextSerializer, ContextDeserializer)):
        return
    if inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(
        getattr(value, "__call__", None)  # noqa: B004  # an object with async __call__
    ):
        base = "ContextDeserializer" if "deserializer" in name else "ContextSerializer"
        raise KafkaConfigError(
            f"{name} {value!r} is an async function: a plain {name} is called, not "
            f"awaited; subclass aiokproto.serialization.{base} (its coroutine is "
            "awaited with the record's context) or pass a plain function"
        )


def in_context(
    key: object, value: object
) -> tuple[ContextSerializer[Any] | None, ContextSerializer[Any] | None] | None:
    """The (key, value) context serializers if either is one, else None (a plain
    callable beside one stays on the plain path)."""
    kctx, vctx = isinstance(key, ContextSerializer), isinstance(value, ContextSerializer)
    if not (kctx or vctx):
        return None
    return (key if kctx else None, value if vctx else None)  # type: ignore[return-value]


def deserializers_in_context(
    key: object, value: object
) -> tuple[ContextDeserializer[Any] | None, ContextDeserializer[Any] | None] | None:
    """The (key, value) context deserializers if either is one, else None (a plain
    callable beside one stays where it is called today, in the fetcher)."""
    kctx, vctx = isinstance(key, ContextDeserializer), isinstance(value, ContextDeserializer)
    if not (kctx or vctx):
        return None
    return (key if kctx else None, value if vctx else None)  # type: ignore[return-value]


R = TypeVar("R", bound=Any)
_KEY, _VALUE = MessageField.KEY, MessageField.VALUE


async def deserialize_records(
    kd: ContextDeserializer[Any] | None, vd: ContextDeserializer[Any] | None, records: list[R]
) -> tuple[list[R], tuple[int, Exception] | None]:
    """Records (``ConsumerRecord``/``ShareRecord``) with key and value deserialized, in
    order, up to the first that fails: ``(done, None)`` or ``(done, (index, error))``."""
    out: list[R] = []
    for i, r in enumerate(records):
        try:
            key, value = r.key, r.value
            if kd is not None and key is not None:
                key = await kd(key, SerializationContext(r.topic, _KEY, r.headers))
            if vd is not None and value is not None:
                value = await vd(value, SerializationContext(r.topic, _VALUE, r.headers))
        except Exception as exc:
            return out, (i, exc)
        out.append(r._replace(key=key, value=value))
    return out, None
