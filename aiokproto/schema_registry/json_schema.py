"""``JSONSerializer`` / ``JSONDeserializer``: JSON Schema (jsonschema) in the Confluent
wire format.

The payload is compact UTF-8 JSON (``separators=(",", ":")``, non-ASCII kept), what
confluent-kafka writes, so both write the same bytes. Records are validated against
the schema on both sides; a failure names the JSON path (``$.items[2].sku``). The
schema's ``title`` is its record name for the record subject strategies. References
are resolved by their names (the ``$ref`` URIs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Generic, overload

import jsonschema  # type: ignore[import-untyped]  # no inline types, no stubs here
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from aiokproto.schema_registry.client import Schema, SchemaRegistryClient
from aiokproto.schema_registry.errors import (
    InvalidSchemaError,
    SchemaMismatchError,
)
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
        if schema.schema_type != "JSON":
            raise InvalidSchemaError(f"a JSON serde needs a JSON schema, not {schema.schema_type}")
        return schema
    return Schema(schema, "JSON")


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"the JSON schema is not JSON: {exc}") from exc


async def _validator(client: SchemaRegistryClient, schema: Schema) -> Any:
    """A jsonschema validator for ``schema``, its references loaded by name."""
    resources: list[tuple[str, Resource[Any]]] = []
    await _add_references(client, schema, resources, set())
    parsed = _loads(schema.schema_str)
    registry: Registry[Any] = Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(parsed)
    except jsonschema.SchemaError as exc:
        raise InvalidSchemaError(f"not a valid JSON Schema: {exc.message}") from exc
    return cls(parsed, registry=registry)


async def _add_references(
    client: SchemaRegistryClient,
    schema: Schema,
    resources: list[tuple[str, Resource[Any]]],
    seen: set[tuple[str, int]],
) -> None:
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        found = await client.get_version(ref.subject, ref.version)
        await _add_references(client, found.schema, resources, seen)
        contents = _loads(found.schema.schema_str)
        resources.append((ref.name, Resource.from_contents(contents, DRAFT202012)))


def _check(validator: Any, data: Any, what: str) -> None:
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise SchemaMismatchError(
            f"record does not match the JSON schema of {what} at {error.json_path}: "
            f"{error.message}",
            error.json_path,
        )


class JSONSerializer(WriterSerializer[T], Generic[T]):
    """Writes JSON-able data (or what ``to_dict(obj, ctx)`` makes of objects), checked
    against the schema. ``conf`` as for ``AvroSerializer``; typed as it is."""

    @overload
    def __init__(
        self: JSONSerializer[Any],
        schema_str: str | Schema,
        schema_registry_client: SchemaRegistryClient,
        to_dict: None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_str: str | Schema,
        schema_registry_client: SchemaRegistryClient,
        to_dict: ToDict[T],
        conf: Mapping[str, Any] | None = None,
    ) -> None: ...
    def __init__(
        self,
        schema_str: str | Schema,
        schema_registry_client: SchemaRegistryClient,
        to_dict: ToDict[T] | None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        schema = _as_schema(schema_str)
        parsed = _loads(schema.schema_str)
        title = parsed.get("title") if isinstance(parsed, dict) else None
        self._client = schema_registry_client
        self._ids = SubjectIds(schema_registry_client, schema, title, conf, self._prepare)
        self._to_dict = to_dict

    async def _prepare(self, schema: Schema) -> Any:
        return await _validator(self._client, schema)

    def _write(self, writer: Writer[Any], data: T, ctx: SerializationContext) -> bytes:
        record: Any = data if self._to_dict is None else self._to_dict(data, ctx)
        _check(writer.prepared, record, repr(writer.subject))
        try:
            text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise SchemaMismatchError(f"record is not JSON-serializable: {exc}", "$") from exc
        return writer.header + text.encode("utf-8")


class JSONDeserializer(ContextDeserializer[T], Generic[T]):
    """Reads wire-format JSON, checked against the writer's schema (from the payload's
    id) and, if given, ``schema_str``; ``from_dict(d, ctx)`` makes objects of it (and
    types it: ``JSONDeserializer[Order]``; ``Any`` without)."""

    @overload
    def __init__(
        self: JSONDeserializer[Any],
        schema_str: str | Schema | None = None,
        from_dict: None = None,
        schema_registry_client: SchemaRegistryClient | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_str: str | Schema | None = None,
        *,
        from_dict: FromDict[T],
        schema_registry_client: SchemaRegistryClient | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        schema_str: str | Schema | None,
        from_dict: FromDict[T],
        schema_registry_client: SchemaRegistryClient | None = None,
    ) -> None: ...
    def __init__(
        self,
        schema_str: str | Schema | None = None,
        from_dict: FromDict[T] | None = None,
        schema_registry_client: SchemaRegistryClient | None = None,
    ) -> None:
        if schema_str is None and schema_registry_client is None:
            raise InvalidSchemaError("JSONDeserializer needs schema_str or a registry client")
        self._reader = None if schema_str is None else _as_schema(schema_str)
        self._reader_validator: Any = None
        self._client = schema_registry_client
        self._from_dict = from_dict
        self._validators: dict[int, Any] = {}

    async def deserialize(self, data: bytes | None, ctx: SerializationContext) -> T:
        if data is None:
            return None  # type: ignore[return-value]  # a None value stays None
        schema_id, payload = unframe(data)
        try:
            record = json.loads(bytes(payload))
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise SchemaMismatchError(
                f"payload with schema id {schema_id} is not JSON: {exc}", "$"
            ) from exc
        if self._client is not None:
            validator = self._validators.get(schema_id)
            if validator is None:
                schema = await self._client.get_schema(schema_id)
                validator = self._validators[schema_id] = await _validator(self._client, schema)
            _check(validator, record, f"schema id {schema_id}")
        if self._reader is not None:
            if self._reader_validator is None:
                self._reader_validator = await _reader_validator(self._client, self._reader)
            _check(self._reader_validator, record, "the reader schema")
        if self._from_dict is not None:
            return self._from_dict(record, ctx)
        return record  # type: ignore[no-any-return]  # T is Any without from_dict


async def _reader_validator(client: SchemaRegistryClient | None, schema: Schema) -> Any:
    if client is None:
        if schema.references:
            raise InvalidSchemaError("a reader schema with references needs a registry client")
        parsed = _loads(schema.schema_str)
        cls = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
        return cls(parsed)
    return await _validator(client, schema)
