"""``ProtobufSerializer`` / ``ProtobufDeserializer``: Protobuf messages in the Confluent
wire format.

After the magic byte and schema id comes the message's path in its ``.proto`` file (the
message indexes: zigzag varints, a count then one index per nesting level; the common
``[0]`` is the single byte 0), then the message's own encoding. The schema registered
is the file's ``FileDescriptorProto``, base64-encoded (what confluent-kafka registers);
imported files are registered first under their file names and referenced.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Literal

# no inline types in protobuf and no stubs here
from google.protobuf.descriptor import (  # type: ignore[import-untyped]
    Descriptor,
    FileDescriptor,
)
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped]

from aiokproto.error_families import KafkaConfigError
from aiokproto.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from aiokproto.schema_registry.errors import NotWireFormatError, SchemaMismatchError
from aiokproto.schema_registry.serde import SubjectIds, unframe
from aiokproto.serialization import (
    AWAIT,
    Await,
    ContextDeserializer,
    ContextSerializer,
    SerializationContext,
)

_EXTRA_KEYS = frozenset({"use.deprecated.format", "skip.known.types"})


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message_indexes(desc: Descriptor) -> list[int]:
    """The message's path in its file: top-level index, then nested indexes."""
    path: list[int] = []
    while desc.containing_type is not None:
        parent = desc.containing_type
        path.append(list(parent.nested_types).index(desc))
        desc = parent
    path.append(list(desc.file.message_types_by_name.values()).index(desc))
    return path[::-1]


def encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"  # the common case, one byte
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)


def decode_indexes(view: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of ``view`` and what follows them."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(view) or shift > 63:
                raise NotWireFormatError("the Protobuf message indexes are cut short")
            byte = view[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    if count == 0:
        return [0], view[pos:]
    if not 0 < count <= 64:
        raise NotWireFormatError(f"{count} Protobuf message indexes: not a Protobuf payload")
    return [varint() for _ in range(count)], view[pos:]


def _is_known_type(file: FileDescriptor) -> bool:
    return bool(file.name.startswith(("google/protobuf/", "google/type/")))


class ProtobufSerializer(ContextSerializer[Message]):
    """Writes messages of ``msg_type`` (a generated Protobuf class).

    ``conf`` as for ``AvroSerializer``, plus ``skip.known.types`` (default True: the
    well-known ``google/protobuf/*.proto`` imports are not registered) and
    ``use.deprecated.format`` (only False: the pre-2020 index format is not written).
    The subject of the record strategies is the message's full name.
    """

    def __init__(
        self,
        msg_type: type[Message],
        schema_registry_client: SchemaRegistryClient,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        conf = dict(conf or {})
        if conf.get("use.deprecated.format", False) is not False:
            raise KafkaConfigError("use.deprecated.format=True is not supported")
        self._skip_known = conf.get("skip.known.types", True)
        if not isinstance(self._skip_known, bool):
            raise KafkaConfigError("skip.known.types must be True or False")
        desc = msg_type.DESCRIPTOR
        self._msg_type = msg_type
        self._client = schema_registry_client
        self._ids: SubjectIds[None] = SubjectIds(
            schema_registry_client,
            _file_schema(desc.file, ()),
            desc.full_name,
            conf,
            _nothing_to_prepare,  # the generated class encodes: nothing to parse
            _EXTRA_KEYS,
        )
        self._indexes = encode_indexes(message_indexes(desc))
        self._refs_ready = not desc.file.dependencies

    async def _resolve_references(self) -> None:
        refs = await self._references(self._msg_type.DESCRIPTOR.file)
        self._ids.schema = _file_schema(self._msg_type.DESCRIPTOR.file, refs)
        self._refs_ready = True

    async def _references(self, file: FileDescriptor) -> tuple[SchemaReference, ...]:
        """Register the imports of ``file`` (theirs first) under their file names."""
        refs: list[SchemaReference] = []
        for dep in file.dependencies:
            if self._skip_known and _is_known_type(dep):
                continue
            schema = _file_schema(dep, await self._references(dep))
            if self._ids.auto_register:
                await self._client.register_schema(dep.name, schema, self._ids.normalize)
                version = (await self._client.lookup_schema(dep.name, schema)).version
            else:
                version = (await self._client.get_latest_version(dep.name)).version
            refs.append(SchemaReference(dep.name, dep.name, version))
        return tuple(refs)

    def _check_type(self, data: Message) -> None:
        if not isinstance(data, self._msg_type):
            raise SchemaMismatchError(
                f"expected a {self._msg_type.DESCRIPTOR.full_name} message, not "
                f"{type(data).__name__}",
                "$",
            )

    def serialize_now(
        self, data: Message, ctx: SerializationContext
    ) -> bytes | Literal[Await.AWAIT] | None:
        if data is None:
            return None
        writer = self._ids.cached(ctx)
        if writer is None:
            return AWAIT
        self._check_type(data)
        body: bytes = data.SerializeToString()
        return writer.header + self._indexes + body

    async def serialize(self, data: Message, ctx: SerializationContext) -> bytes | None:
        if data is None:
            return None
        self._check_type(data)
        if not self._refs_ready:
            await self._resolve_references()
        writer = await self._ids.writer(ctx)
        body: bytes = data.SerializeToString()
        return writer.header + self._indexes + body


async def _nothing_to_prepare(schema: Schema) -> None:
    return None


def _file_schema(file: FileDescriptor, refs: tuple[SchemaReference, ...]) -> Schema:
    text = base64.standard_b64encode(file.serialized_pb).decode("ascii")
    return Schema(text, "PROTOBUF", refs)


class ProtobufDeserializer(ContextDeserializer[Message]):
    """Reads wire-format Protobuf into ``message_type`` messages (the generated class
    says how to decode; the registry is not asked)."""

    def __init__(self, message_type: type[Message], conf: Mapping[str, Any] | None = None) -> None:
        conf = dict(conf or {})
        unknown = sorted(set(conf) - {"use.deprecated.format"})
        if unknown or conf.get("use.deprecated.format", False) is not False:
            raise KafkaConfigError(
                f"ProtobufDeserializer options: only use.deprecated.format=False, not {conf}"
            )
        self._msg_type = message_type

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> Message:
        if data is None:
            return None  # a None value stays None
        schema_id, payload = unframe(data)
        _, body = decode_indexes(payload)
        try:
            message: Message = self._msg_type.FromString(bytes(body))
            return message
        except DecodeError as exc:
            raise SchemaMismatchError(
                f"payload with schema id {schema_id} is not a "
                f"{self._msg_type.DESCRIPTOR.full_name}: {exc}",
                "$",
            ) from exc
