"""What every registry serializer shares: the Confluent wire format (magic byte 0, a
4-byte big-endian schema id, the payload), the subject name strategies and the
``auto.register.schemas`` / ``use.latest.version`` / ``normalize.schemas`` choice of
the schema id to write with.

After the first record of a subject the id comes from the serializer's own dict: the
registry is asked once per subject (the client's single-flight makes it one request
for all the tasks that miss at once).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from aiokproto.error_families import KafkaConfigError
from aiokproto.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from aiokproto.schema_registry.errors import NotWireFormatError
from aiokproto.serialization import SerializationContext

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


class SubjectIds:
    """The schema id a serializer writes with, per subject, fetched once each."""

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema: Schema,
        record_name: str | None,
        conf: Mapping[str, Any] | None,
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
        self.ids: dict[str, tuple[int, Schema]] = {}

    def subject(self, ctx: SerializationContext) -> str:
        return self.strategy(ctx, self.record_name)

    async def fetch(self, subject: str) -> tuple[int, Schema]:
        """The id (and the schema it names) to write ``subject``'s records with."""
        found: RegisteredSchema | None = None
        if self.use_latest:
            found = await self.client.get_latest_version(subject)
            entry = (found.schema_id, found.schema)
        elif self.auto_register:
            schema_id = await self.client.register_schema(subject, self.schema, self.normalize)
            entry = (schema_id, self.schema)
        else:
            found = await self.client.lookup_schema(subject, self.schema, self.normalize)
            entry = (found.schema_id, self.schema)
        if not self.use_latest:
            self.ids[subject] = entry  # a latest version may change: the client's TTL rules
        return entry
