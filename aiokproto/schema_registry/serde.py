"""What every registry serializer shares: the Confluent wire format (magic byte 0, a
4-byte big-endian schema id, the payload), the subject name strategies and the
``auto.register.schemas`` / ``use.latest.version`` / ``normalize.schemas`` choice of
the schema id to write with.

``SubjectIds`` is the one look-up all three serializers make per record: after the
first record of a subject, its ``Writer`` (id, wire header, the format's prepared
schema) comes from a dict, keyed by (topic, field) under the built-in strategies, so
a hit is one dict look-up and no coroutine (``cached``). The registry is asked once
per subject (the client's single-flight makes it one request for all the tasks that
miss at once).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from aiokproto.error_families import KafkaConfigError
from aiokproto.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from aiokproto.schema_registry.errors import NotWireFormatError
from aiokproto.serialization import (
    AWAIT,
    Await,
    ContextSerializer,
    MessageField,
    SerializationContext,
)

P = TypeVar("P")
T = TypeVar("T")
# to_dict(obj, ctx) makes what is written of an object; from_dict(d, ctx) an object of
# what was read: their types are the serdes' type parameter (Any without them)
ToDict = Callable[[T, SerializationContext], Any]
FromDict = Callable[[Any, SerializationContext], T]

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")
HEADER_SIZE = _HEADER.size

SubjectNameStrategy = Callable[[SerializationContext, "str | None"], str]


def topic_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-key`` / ``<topic>-value`` (the default)."""
    return f"{ctx.topic}-{ctx.field}"


def record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """The record's fully qualified name: one schema across topics."""
    if not record_name:
        raise KafkaConfigError("record_subject_name_strategy needs a named schema (a record)")
    return record_name


def topic_record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-<record name>``: several record types in one topic."""
    if not record_name:
        raise KafkaConfigError("topic_record_subject_name_strategy needs a named schema (a record)")
    return f"{ctx.topic}-{record_name}"


_BUILT_IN: tuple[SubjectNameStrategy, ...] = (
    topic_subject_name_strategy,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)


def header(schema_id: int) -> bytes:
    """What every payload written with ``schema_id`` starts with."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes | bytearray | memoryview) -> tuple[int, memoryview]:
    """The schema id and the payload of a wire-format message, or ``NotWireFormatError``."""
    view = memoryview(data)
    if len(view) < HEADER_SIZE or view[0] != MAGIC_BYTE:
        first = f"0x{view[0]:02x}" if len(view) else "nothing"
        raise NotWireFormatError(
            f"not a schema registry wire-format payload: {len(view)} byte(s) starting with "
            f"{first} (expected magic byte 0 and a 4-byte schema id)"
        )
    return _HEADER.unpack_from(view)[1], view[HEADER_SIZE:]


_SERIALIZER_KEYS = frozenset(
    {"auto.register.schemas", "use.latest.version", "normalize.schemas", "subject.name.strategy"}
)


def _flag(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    value = conf.get(key, default)
    if not isinstance(value, bool):
        raise KafkaConfigError(f"serializer option {key!r} must be True or False, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Writer(Generic[P]):
    """What a serializer writes one subject's records with."""

    subject: str
    schema_id: int
    header: bytes  # the magic byte and the id: every payload starts with it
    prepared: P  # the format's own form of the schema (parsed, a validator, ...)


class SubjectIds(Generic[P]):
    """The ``Writer`` of each subject a serializer writes to, fetched once each.

    ``prepare(schema)`` makes the format's form of a schema (once per schema id).
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema: Schema,
        record_name: str | None,
        conf: Mapping[str, Any] | None,
        prepare: Callable[[Schema], Awaitable[P]],
        extra_keys: frozenset[str] = frozenset(),
    ) -> None:
        conf = dict(conf or {})
        unknown = sorted(set(conf) - _SERIALIZER_KEYS - extra_keys)
        if unknown:
            raise KafkaConfigError(
                f"unknown serializer option(s) {unknown}; known: "
                f"{sorted(_SERIALIZER_KEYS | extra_keys)}"
            )
        self.client = client
        self.schema = schema
        self.record_name = record_name
        self.auto_register = _flag(conf, "auto.register.schemas", True)
        self.use_latest = _flag(conf, "use.latest.version", False)
        self.normalize = _flag(conf, "normalize.schemas", False)
        if self.use_latest and self.auto_register:
            # confluent-kafka's rule: the two choose the id differently
            raise KafkaConfigError("use.latest.version=True needs auto.register.schemas=False")
        strategy = conf.get("subject.name.strategy", topic_subject_name_strategy)
        if not callable(strategy):
            raise KafkaConfigError(f"subject.name.strategy must be callable, not {strategy!r}")
        self.strategy: SubjectNameStrategy = strategy
        self._prepare = prepare
        self._prepared: dict[int, P] = {}
        self._by_subject: dict[str, Writer[P]] = {}
        # a built-in strategy names the subject from the topic and field alone (the
        # record name is fixed): a record's writer is then one look-up by those two
        self._by_field: dict[tuple[str, MessageField], Writer[P]] | None = (
            {} if strategy in _BUILT_IN else None
        )

    def cached(self, ctx: SerializationContext) -> Writer[P] | None:
        """The writer for ``ctx``'s record if nothing needs awaiting, else None."""
        by_field = self._by_field
        if by_field is not None:
            return by_field.get((ctx.topic, ctx.field))
        return self._by_subject.get(self.strategy(ctx, self.record_name))

    async def writer(self, ctx: SerializationContext) -> Writer[P]:
        """The writer for ``ctx``'s record, from the registry on a miss."""
        found = self.cached(ctx)
        if found is not None:
            return found
        subject = self.strategy(ctx, self.record_name)
        schema_id, schema = await self.fetch(subject)
        prepared = self._prepared.get(schema_id)
        if prepared is None:
            prepared = self._prepared[schema_id] = await self._prepare(schema)
        writer = Writer(subject, schema_id, header(schema_id), prepared)
        if not self.use_latest:  # a latest version may change: the client's TTL rules
            self._by_subject[subject] = writer
            if self._by_field is not None:
                self._by_field[(ctx.topic, ctx.field)] = writer
        return writer

    async def fetch(self, subject: str) -> tuple[int, Schema]:
        """The id (and the schema it names) to write ``subject``'s records with."""
        if self.use_latest:
            found: RegisteredSchema = await self.client.get_latest_version(subject)
            return found.schema_id, found.schema
        if self.auto_register:
            schema_id = await self.client.register_schema(subject, self.schema, self.normalize)
            return schema_id, self.schema
        found = await self.client.lookup_schema(subject, self.schema, self.normalize)
        return found.schema_id, self.schema


class WriterSerializer(ContextSerializer[T], Generic[T]):
    """A serializer that needs only its subject's ``Writer`` to write a record (Avro,
    JSON Schema): ``serialize_now`` answers from ``SubjectIds``' cache, ``serialize``
    awaits the look-up; subclasses set ``_ids`` and implement ``_write``."""

    _ids: SubjectIds[Any]

    def _write(self, writer: Writer[Any], data: T, ctx: SerializationContext) -> bytes:
        raise NotImplementedError

    def serialize_now(
        self, data: T, ctx: SerializationContext
    ) -> bytes | Literal[Await.AWAIT] | None:
        if data is None:
            return None
        writer = self._ids.cached(ctx)
        return AWAIT if writer is None else self._write(writer, data, ctx)

    async def serialize(self, data: T, ctx: SerializationContext) -> bytes | None:
        if data is None:
            return None
        return self._write(await self._ids.writer(ctx), data, ctx)
