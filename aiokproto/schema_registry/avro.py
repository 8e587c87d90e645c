"""``AvroSerializer`` / ``AvroDeserializer``: Avro (fastavro) in the Confluent wire format.

The serializer writes with its own schema (registered or looked up under the subject)
or with the subject's latest version (``use.latest.version``); the deserializer reads
with the writer's schema from the id in the payload, resolved to its own reader schema
when it has one (schema evolution). Referenced schemas (named types from other
subjects) are fetched and parsed first.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any, Generic, overload

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.validation import validate

from aiokproto.schema_registry.client import Schema, SchemaRegistryClient
from aiokproto.schema_registry.errors import InvalidSchemaError, SchemaMismatchError
from aiokproto.schema_registry.serde import (
    FromDict,
    SubjectIds,
    T,
    ToDict,
    Writer,
    WriterSerializer,
    unframe,
)
from aiokproto.serialization import (
    ContextDeserializer,
    SerializationContext,
)


def _as_schema(schema: str | Schema) -> Schema:
    if isinstance(schema, Schema):
        if schema.schema_type != "AVRO":
            raise InvalidSchemaError(
                f"an Avro serde needs an AVRO schema, not {schema.schema_type}"
            )
        return schema
    return Schema(schema, "AVRO")


async def _parse(client: SchemaRegistryClient, schema: Schema) -> Any:
    """The fastavro-parsed schema, its references' named types resolved first."""
    named: dict[str, Any] = {}
    await _add_references(client, schema, named, set())
    try:
        return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise InvalidSchemaError(f"not a valid Avro schema: {exc}") from exc


async def _add_references(
    client: SchemaRegistryClient, schema: Schema, named: dict[str, Any], seen: set[tuple[str, int]]
) -> None:
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        found = await client.get_version(ref.subject, ref.version)
        await _add_references(client, found.schema, named, seen)
        try:
            fastavro.parse_schema(json.loads(found.schema.schema_str), named_schemas=named)
        except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
            raise InvalidSchemaError(
                f"reference {ref.name!r} ({ref.subject} version {ref.version}) is not a valid "
                f"Avro schema: {exc}"
            ) from exc


def _record_name(schema: Schema) -> str | None:
    try:
        parsed = json.loads(schema.schema_str)
    except ValueError as exc:
        raise InvalidSchemaError(f"the Avro schema is not JSON: {exc}") from exc
    if isinstance(parsed, dict) and parsed.get("type") == "record" and "name" in parsed:
        name = str(parsed["name"])
        namespace = parsed.get("namespace")
        return name if "." in name or not namespace else f"{namespace}.{name}"
    return None


class AvroSerializer(WriterSerializer[T], Generic[T]):
    """Writes dicts (or what ``to_dict(obj, ctx)`` makes of objects) as Avro.

    ``conf``: ``auto.register.schemas`` (default True), ``use.latest.version``,
    ``normalize.schemas``, ``subject.name.strategy`` (default
    ``topic_subject_name_strategy``: ``<topic>-value`` / ``<topic>-key``).
    Typed: with ``to_dict`` it is an ``AvroSerializer[Order]`` (the producer's
    ``send`` takes orders), without an ``AvroSerializer[Any]``.
    """

    @overload
    def __init__(
        self: AvroSerializer[Any],
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema,
        to_dict: None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema,
        to_dict: ToDict[T],
        conf: Mapping[str, Any] | None = None,
    ) -> None: ...
    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema,
        to_dict: ToDict[T] | None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        schema = _as_schema(schema_str)
        self._client = schema_registry_client
        self._ids = SubjectIds(
            schema_registry_client, schema, _record_name(schema), conf, self._prepare
        )
        self._to_dict = to_dict

    async def _prepare(self, schema: Schema) -> Any:
        return await _parse(self._client, schema)

    def _write(self, writer: Writer[Any], data: T, ctx: SerializationContext) -> bytes:
        record: Any = data if self._to_dict is None else self._to_dict(data, ctx)
        buf = io.BytesIO()
        buf.write(writer.header)
        try:
            fastavro.schemaless_writer(buf, writer.prepared, record)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            raise _mismatch(record, writer.prepared, writer.subject, exc) from exc
        return buf.getvalue()


def _mismatch(data: Any, parsed: Any, subject: str, exc: Exception) -> SchemaMismatchError:
    # the writer's message does not say where; the validator does (only on failure)
    try:
        validate(data, parsed, raise_errors=True)
    except fastavro.validation.ValidationError as verr:
        # the deepest path is where it breaks (a union reports each branch it tried:
        # "R.u: ... is not null" came first for a bad field inside the record branch)
        path = max((str(e.field) for e in verr.errors), key=len)
        at = [e for e in verr.errors if str(e.field) == path]
        expected = " or ".join(dict.fromkeys(_describe(e.schema) for e in at))
        return SchemaMismatchError(
            f"record does not match the Avro schema of {subject!r} at {path or '$'}: "
            f"{at[0].datum!r} is not {expected}",
            path,
        )
    except Exception:  # the validator itself choked: report the writer's error
        pass
    return SchemaMismatchError(f"record does not match the Avro schema of {subject!r}: {exc}", "")


def _describe(schema: Any) -> str:
    """A schema in a few words: its name, or its type (a parsed schema's repr holds
    every named type and fastavro's own keys)."""
    if isinstance(schema, list):
        return " | ".join(_describe(s) for s in schema)
    if isinstance(schema, dict):
        if "name" in schema:
            return f"{schema.get('type')} {schema['name']}"
        kind = schema.get("type")
        if kind == "array":
            return f"array of {_describe(schema.get('items'))}"
        if kind == "map":
            return f"map of {_describe(schema.get('values'))}"
        return str(kind)
    return str(schema)


class AvroDeserializer(ContextDeserializer[T], Generic[T]):
    """Reads wire-format Avro into dicts (or ``from_dict(d, ctx)``).

    With ``schema_str`` records are resolved to it (a reader on an older or newer
    schema, as the subject's compatibility rule allows); without, they are read as
    written. Typed: with ``from_dict`` returning ``Order`` it is an
    ``AvroDeserializer[Order]``, and a consumer given it has ``record.value: Order``;
    without, ``Any`` (a dict for a record schema, whatever the schema holds otherwise).
    """

    @overload
    def __init__(
        self: AvroDeserializer[Any],
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        from_dict: None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        *,
        from_dict: FromDict[T],
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None,
        from_dict: FromDict[T],
    ) -> None: ...
    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        from_dict: FromDict[T] | None = None,
    ) -> None:
        self._client = schema_registry_client
        self._reader = None if schema_str is None else _as_schema(schema_str)
        self._reader_parsed: Any = None
        self._from_dict = from_dict
        self._writers: dict[int, Any] = {}

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> T:
        if data is None:
            return None  # type: ignore[return-value]  # a None value stays None
        schema_id, payload = unframe(data)
        writer = self._writers.get(schema_id)
        if writer is None:
            schema = await self._client.get_schema(schema_id)
            writer = self._writers[schema_id] = await _parse(self._client, schema)
        reader = self._reader_parsed
        if reader is None and self._reader is not None:
            reader = self._reader_parsed = await _parse(self._client, self._reader)
        try:
            record = fastavro.schemaless_reader(io.BytesIO(payload), writer, reader)
        except (EOFError, ValueError, IndexError, TypeError, KeyError) as exc:
            raise SchemaMismatchError(
                f"payload with schema id {schema_id} could not be read as Avro: {exc!r}", ""
            ) from exc
        except SchemaResolutionError as exc:  # the reader schema cannot read the writer's
            raise SchemaMismatchError(
                f"payload with schema id {schema_id} cannot be read with the reader schema: {exc}",
                "",
            ) from exc
        if self._from_dict is not None:
            return self._from_dict(record, ctx)
        return record  # type: ignore[return-value]  # T is Any without from_dict
