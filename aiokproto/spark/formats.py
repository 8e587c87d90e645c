"""Typed key/value columns for the source: ``valueFormat=avro`` (or ``json``, and
``keyFormat``) decodes each record with the schema registry's deserializers into a
Spark struct (or whatever type the schema describes), instead of binary.

Option names: Spark's Kafka options are camelCase (``startingOffsets``,
``includeHeaders``), and another system's own settings go under its prefix
(``kafka.*``); so ``valueFormat`` / ``valueSubject`` / ``valueSchema`` here, and
``schema.registry.<option>`` for ``SchemaRegistryClient``'s options
(``schema.registry.url``, ``schema.registry.basic.auth.user.info``, ...):
``schema.registry.url`` is also what Confluent's serializers, Kafka Connect and ABRiS
call it. ``valueSubject`` is the subject whose latest version gives the column type
(Databricks' ``from_avro(subject=...)``); ``valueSchema`` is a schema text instead
(Spark's ``from_avro(jsonFormatSchema)``).

The column type is resolved on the driver, from the reader schema; each record is
read with its writer's schema (the id in the payload) resolved to it, so records
written with older or newer compatible schemas land in the same columns. A record
that cannot be decoded fails the task with the deserializer's typed error (Spark's
FAILFAST, the default of its ``from_avro``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokproto.errors import KafkaConfigError

FORMATS = ("binary", "avro", "json")
REGISTRY_PREFIX = "schema.registry."
FORMAT_OPTIONS = (
    "keyFormat",
    "valueFormat",
    "keySubject",
    "valueSubject",
    "keySchema",
    "valueSchema",
)
# SchemaRegistryClient's options that take numbers (Spark hands every option as text)
_NUMBERS = frozenset(
    {"timeout", "max.retries", "retries.wait.ms", "retries.max.wait.ms", "cache.latest.ttl.sec"}
)


@dataclass(frozen=True, slots=True)
class ColumnRequest:
    """What the options ask of one column (parsed on the driver, nothing fetched)."""

    field: str  # "key" or "value"
    format: str  # "avro" or "json"
    subject: str | None
    schema: str | None  # the reader schema's text, given as an option


@dataclass(frozen=True, slots=True)
class Column:
    """One decoded column: its reader schema and Spark type (picklable)."""

    field: str
    format: str
    schema_str: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)
    spark_type_json: str  # the pyspark DataType as JSON

    def spark_type(self) -> Any:
        from pyspark.sql.types import _parse_datatype_json_string

        return _parse_datatype_json_string(self.spark_type_json)


@dataclass(frozen=True, slots=True)
class Formats:
    """The registry's options and the decoded columns (None: that column stays binary)."""

    registry: Mapping[str, Any]
    key: ColumnRequest | Column | None
    value: ColumnRequest | Column | None


def _text(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value).strip()


def _column(
    options: Mapping[str, str], field: str, default_subject: str | None
) -> ColumnRequest | None:
    fmt = (_text(options, f"{field}Format") or "binary").lower()
    subject = _text(options, f"{field}Subject")
    schema = _text(options, f"{field}Schema")
    if fmt not in FORMATS:
        hint = (
            " (a Protobuf message needs its generated class: read binary and decode with "
            "aiokproto.schema_registry.ProtobufDeserializer)"
            if fmt == "protobuf"
            else ""
        )
        raise KafkaConfigError(
            f"option {field}Format must be one of {', '.join(FORMATS)}, not {fmt!r}{hint}"
        )
    if fmt == "binary":
        for name, given in ((f"{field}Subject", subject), (f"{field}Schema", schema)):
            if given is not None:
                raise KafkaConfigError(
                    f"option {name} needs {field}Format avro or json ({field}Format is binary)"
                )
        return None
    if subject is not None and schema is not None:
        raise KafkaConfigError(f"give {field}Subject or {field}Schema, not both")
    if subject == "" or schema == "":
        raise KafkaConfigError(f"option {field}Subject / {field}Schema is empty")
    if subject is None and schema is None:
        if default_subject is None:
            raise KafkaConfigError(
                f"{field}Format={fmt} reads several topics: give {field}Subject (the "
                f"subject whose latest schema types the {field} column) or {field}Schema"
            )
        subject = f"{default_subject}-{field}"
    return ColumnRequest(field, fmt, subject, schema)


def registry_conf(options: Mapping[str, str]) -> dict[str, Any]:
    """``schema.registry.*`` options as ``SchemaRegistryClient``'s conf (checked)."""
    conf: dict[str, Any] = {}
    for key, value in options.items():
        if not key.startswith(REGISTRY_PREFIX):
            continue
        name = key[len(REGISTRY_PREFIX) :]
        if name in _NUMBERS:
            try:
                conf[name] = float(str(value).strip())
            except ValueError:
                raise KafkaConfigError(
                    f"option {key} must be a number, not {value!r}"
                ) from None
        else:
            conf[name] = str(value)
    if conf:
        try:
            from aiokproto.schema_registry import SchemaRegistryClient
        except ImportError as exc:  # httpx missing
            raise KafkaConfigError(
                "schema.registry.* options need pip install 'aiokproto[schema-registry]' "
                f"({exc})"
            ) from None
        # the client checks every option when made (nothing is connected yet)
        SchemaRegistryClient({"url": "http://checking", **conf})
    return conf


def parse_formats(options: Mapping[str, str], topics: Sequence[str] | None) -> Formats | None:
    """The format options (lower-cased keys) of a source reading ``topics`` (None: a
    pattern), checked without asking the registry; None if both columns stay binary."""
    only = topics[0] if topics is not None and len(set(topics)) == 1 else None
    key = _column(options, "key", only)
    value = _column(options, "value", only)
    conf = registry_conf(options)
    if key is None and value is None:
        if conf:
            raise KafkaConfigError(
                "schema.registry.* options are set but keyFormat and valueFormat are binary: "
                "set valueFormat (or keyFormat) to avro or json"
            )
        return None
    if "url" not in conf:
        what = "valueFormat" if value is not None else "keyFormat"
        raise KafkaConfigError(f"{what} avro/json needs the option schema.registry.url")
    return Formats(conf, key, value)


# -- the driver: reader schemas and Spark types ----------------------------------------


def resolve(formats: Formats) -> Formats:
    """``formats`` with each column's reader schema fetched and its Spark type made
    (asks the registry: on the driver, before any task runs)."""
    return asyncio.run(_resolve(formats))


async def _resolve(formats: Formats) -> Formats:
    from aiokproto.schema_registry import Schema, SchemaRegistryClient

    async with SchemaRegistryClient(dict(formats.registry)) as sr:

        async def one(req: ColumnRequest | Column | None) -> Column | None:
            if req is None or isinstance(req, Column):
                return req
            if req.subject is not None:
                found = await sr.get_latest_version(req.subject)
                schema = found.schema
                if schema.schema_type != req.format.upper():
                    raise KafkaConfigError(
                        f"{req.field}Format is {req.format} but subject {req.subject!r} "
                        f"holds a {schema.schema_type} schema"
                    )
            else:
                assert req.schema is not None
                schema = Schema(req.schema, req.format.upper())
            if req.format == "avro":
                dtype = await _avro_spark_type(sr, schema)
            else:
                dtype = await _json_spark_type(sr, schema)
            refs = tuple((r.name, r.subject, r.version) for r in schema.references)
            return Column(req.field, req.format, schema.schema_str, refs, dtype.json())

        return Formats(formats.registry, await one(formats.key), await one(formats.value))


async def _avro_spark_type(sr: Any, schema: Any) -> Any:
    import fastavro

    from aiokproto.schema_registry.avro import _add_references
    from aiokproto.schema_registry.errors import InvalidSchemaError

    named: dict[str, Any] = {}
    await _add_references(sr, schema, named, set())
    try:
        parsed = fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise InvalidSchemaError(f"not a valid Avro schema: {exc}") from exc
    return avro_to_spark(parsed, named)  # parse_schema added the named types to it


async def _json_spark_type(sr: Any, schema: Any) -> Any:
    from aiokproto.schema_registry.errors import InvalidSchemaError

    try:
        parsed = json.loads(schema.schema_str)
    except ValueError as exc:
        raise InvalidSchemaError(f"the JSON schema is not JSON: {exc}") from exc
    refs: dict[str, Any] = {}
    for ref in schema.references:
        found = await sr.get_version(ref.subject, ref.version)
        refs[ref.name] = json.loads(found.schema.schema_str)
    return json_to_spark(parsed, parsed, refs)


def _unsupported(what: str) -> KafkaConfigError:
    return KafkaConfigError(
        f"{what} has no Spark column type here; read the column as binary "
        "(keyFormat/valueFormat binary) and decode it yourself"
    )


def avro_to_spark(schema: Any, named: Mapping[str, Any], path: str = "$") -> Any:
    """The Spark type of a (fastavro-parsed) Avro schema, as Spark's from_avro maps
    them: records are structs, enums strings, a union with null a nullable type."""
    from pyspark.sql import types as t

    return _avro(schema, named, path, t, ())


def _avro(schema: Any, named: Mapping[str, Any], path: str, t: Any, seen: tuple[str, ...]) -> Any:
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return _avro(branches[0], named, path, t, seen)
        raise _unsupported(f"the Avro union {schema} at {path}")
    if isinstance(schema, str):
        primitive = {
            "boolean": t.BooleanType(),
            "int": t.IntegerType(),
            "long": t.LongType(),
            "float": t.FloatType(),
            "double": t.DoubleType(),
            "bytes": t.BinaryType(),
            "string": t.StringType(),
        }.get(schema)
        if primitive is not None:
            return primitive
        if schema in named:
            if schema in seen:
                raise _unsupported(f"the recursive Avro type {schema} at {path}")
            return _avro(named[schema], named, path, t, seen)  # the record adds itself
        raise _unsupported(f"the Avro type {schema!r} at {path}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return t.DecimalType(schema.get("precision", 10), schema.get("scale", 0))
    if logical == "date" and kind == "int":
        return t.DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return t.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return t.TimestampNTZType()
    if logical == "uuid":
        raise _unsupported(f"the Avro uuid at {path} (fastavro reads it as uuid.UUID)")
    if kind == "record":
        name = schema.get("name", "")
        if name in seen:
            raise _unsupported(f"the recursive Avro record {name} at {path}")
        fields = []
        for f in schema["fields"]:
            ftype = f["type"]
            nullable = isinstance(ftype, list) and "null" in ftype
            fields.append(
                t.StructField(
                    f["name"],
                    _avro(ftype, named, f"{path}.{f['name']}", t, (*seen, name)),
                    nullable,
                )
            )
        return t.StructType(fields)
    if kind == "enum":
        return t.StringType()
    if kind == "fixed":
        return t.BinaryType()
    if kind == "array":
        items = schema["items"]
        return t.ArrayType(
            _avro(items, named, f"{path}[]", t, seen), isinstance(items, list) and "null" in items
        )
    if kind == "map":
        values = schema["values"]
        return t.MapType(
            t.StringType(),
            _avro(values, named, f"{path}{{}}", t, seen),
            isinstance(values, list) and "null" in values,
        )
    if isinstance(kind, (str, list, dict)):
        return _avro(kind, named, path, t, seen)
    raise _unsupported(f"the Avro schema {schema!r} at {path}")


def json_to_spark(schema: Any, root: Any, refs: Mapping[str, Any], path: str = "$") -> Any:
    """The Spark type of a JSON Schema: objects with properties are structs (every
    field nullable), ``additionalProperties`` alone a map, integer long, number double."""
    from pyspark.sql import types as t

    return _json(schema, root, refs, path, t, 0)


def _json(schema: Any, root: Any, refs: Mapping[str, Any], path: str, t: Any, depth: int) -> Any:
    if depth > 32:
        raise _unsupported(f"the JSON schema at {path} (nested too deep, or recursive)")
    if not isinstance(schema, dict):
        raise _unsupported(f"the JSON schema {schema!r} at {path}")
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _json(_follow(ref, root, refs, path), root, refs, path, t, depth + 1)
    for combo in ("oneOf", "anyOf"):
        if combo in schema:
            branches = [
                s for s in schema[combo] if not (isinstance(s, dict) and s.get("type") == "null")
            ]
            if len(branches) != 1:
                raise _unsupported(f"the JSON {combo} at {path}")
            return _json(branches[0], root, refs, path, t, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise _unsupported(f"the JSON type {kind} at {path}")
        kind = kinds[0]
    if kind is None and "properties" in schema:
        kind = "object"
    if kind is None and ("enum" in schema or "const" in schema):
        kind = "string"
    simple = {
        "string": t.StringType(),
        "integer": t.LongType(),
        "number": t.DoubleType(),
        "boolean": t.BooleanType(),
    }.get(kind)  # type: ignore[arg-type]
    if simple is not None:
        return simple
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise _unsupported(f"the JSON array at {path} without one items schema")
        return t.ArrayType(_json(items, root, refs, f"{path}[*]", t, depth + 1), True)
    if kind == "object":
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            return t.StructType(
                [
                    t.StructField(name, _json(sub, root, refs, f"{path}.{name}", t, depth + 1))
                    for name, sub in props.items()
                ]
            )
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return t.MapType(
                t.StringType(), _json(extra, root, refs, f"{path}.*", t, depth + 1), True
            )
        raise _unsupported(f"the free-form JSON object at {path}")
    raise _unsupported(f"the JSON schema {json.dumps(schema)[:80]} at {path}")


def _follow(ref: str, root: Any, refs: Mapping[str, Any], path: str) -> Any:
    base, _, pointer = ref.partition("#")
    doc = root if not base else refs.get(base)
    if doc is None:
        raise _unsupported(f"the JSON $ref {ref!r} at {path} (not a registered reference)")
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(doc, dict) or part not in doc:
            raise _unsupported(f"the JSON $ref {ref!r} at {path} (nothing there)")
        doc = doc[part]
    return doc


# -- the executors: decode, then Arrow ---------------------------------------------------


def _deserializer(sr: Any, column: Column | ColumnRequest | None) -> Any:
    if column is None:
        return None
    assert isinstance(column, Column), "formats are resolved on the driver"
    from aiokproto.schema_registry import Schema, SchemaReference

    refs = tuple(SchemaReference(*r) for r in column.references)
    schema = Schema(column.schema_str, column.format.upper(), refs)
    if column.format == "avro":
        from aiokproto.schema_registry.avro import AvroDeserializer

        return AvroDeserializer(sr, schema)
    from aiokproto.schema_registry.json_schema import JSONDeserializer

    return JSONDeserializer(schema, schema_registry_client=sr)


async def decoded(
    formats: Formats,
    client: Mapping[str, Any],
    read: Callable[[Mapping[str, Any]], AsyncIterator[Any]],
) -> AsyncIterator[Any]:
    """``read(client options)``'s batches, its consumer's records decoded by the
    registry's deserializers (one registry client per task, on the task's loop)."""
    from aiokproto.schema_registry import SchemaRegistryClient

    async with SchemaRegistryClient(dict(formats.registry)) as sr:
        options = dict(client)
        kd, vd = _deserializer(sr, formats.key), _deserializer(sr, formats.value)
        if kd is not None:
            options["key_deserializer"] = kd
        if vd is not None:
            options["value_deserializer"] = vd
        async for batch in read(options):
            yield batch


def arrow_types(formats: Formats) -> tuple[Any, Any]:
    """The Arrow types of the decoded key and value columns (None: binary)."""

    def one(column: Column | ColumnRequest | None) -> Any:
        if column is None:
            return None
        assert isinstance(column, Column)
        return arrow_type(column.spark_type())

    return one(formats.key), one(formats.value)


def arrow_type(dtype: Any) -> Any:
    """The Arrow type Spark expects for ``dtype`` (the types the converters above make;
    spelt out: pyspark's own ``to_arrow_type`` changed its signature between 4.0 and
    4.3). Timestamps in µs UTC, list items named ``element``, as in arrow.py."""
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyspark.sql import types as t

    if isinstance(dtype, t.StructType):
        return pa.struct(
            [pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in dtype.fields]
        )
    if isinstance(dtype, t.ArrayType):
        return pa.list_(pa.field("element", arrow_type(dtype.elementType), dtype.containsNull))
    if isinstance(dtype, t.MapType):
        return pa.map_(
            pa.field("key", arrow_type(dtype.keyType), False),
            pa.field("value", arrow_type(dtype.valueType), dtype.valueContainsNull),
        )
    if isinstance(dtype, t.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    simple = {
        t.BooleanType: pa.bool_(),
        t.IntegerType: pa.int32(),
        t.LongType: pa.int64(),
        t.FloatType: pa.float32(),
        t.DoubleType: pa.float64(),
        t.BinaryType: pa.binary(),
        t.StringType: pa.string(),
        t.DateType: pa.date32(),
        t.TimestampType: pa.timestamp("us", tz="UTC"),
        t.TimestampNTZType: pa.timestamp("us"),
    }.get(type(dtype))
    if simple is None:
        raise _unsupported(f"the Spark type {dtype.simpleString()}")
    return simple


def typed_schema(include_headers: bool, formats: Formats) -> Any:
    """The source's schema (a pyspark StructType: arrow.DDL's columns) with the decoded
    columns' types (made here: ``StructType.fromDDL`` needs a session, and the data
    source's ``schema()`` runs in a Python worker without one)."""
    from pyspark.sql import types as t

    types = {c.field: c.spark_type() for c in (formats.key, formats.value) if isinstance(c, Column)}
    fields = [
        t.StructField("key", types.get("key", t.BinaryType())),
        t.StructField("value", types.get("value", t.BinaryType())),
        t.StructField("topic", t.StringType()),
        t.StructField("partition", t.IntegerType()),
        t.StructField("offset", t.LongType()),
        t.StructField("timestamp", t.TimestampType()),
        t.StructField("timestampType", t.IntegerType()),
    ]
    if include_headers:
        header = t.StructType(
            [t.StructField("key", t.StringType()), t.StructField("value", t.BinaryType())]
        )
        fields.append(t.StructField("headers", t.ArrayType(header)))
    return t.StructType(fields)


def with_types(formats: Formats, schema: Any) -> Formats:
    """``formats`` (resolved) with the column types of the DataFrame's ``schema`` (what
    Spark checks each batch against: the reader schema may have moved on since)."""
    from pyspark.sql.types import BinaryType

    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def one(column: Column | ColumnRequest | None) -> Column | ColumnRequest | None:
        if not isinstance(column, Column):
            return column
        dtype = fields.get(column.field)
        if dtype is None:
            return column
        if isinstance(dtype, BinaryType):
            raise KafkaConfigError(
                f"{column.field}Format={column.format} decodes the {column.field} column, but "
                f"the schema given makes it binary: drop the column's type from the schema"
            )
        return Column(
            column.field, column.format, column.schema_str, column.references, dtype.json()
        )

    return Formats(formats.registry, one(formats.key), one(formats.value))


def to_typed_batch(
    topic: str,
    partition: int,
    records: Sequence[Any],
    include_headers: bool,
    key_type: Any,
    value_type: Any,
) -> Any:
    """One partition's decoded records as an Arrow batch: the source's columns, the key
    and value as ``key_type`` / ``value_type`` (None: binary)."""
    import pyarrow as pa

    from aiokproto.spark import arrow

    base = arrow.SCHEMA_WITH_HEADERS if include_headers else arrow.SCHEMA
    kt = pa.binary() if key_type is None else key_type
    vt = pa.binary() if value_type is None else value_type
    given = {"key": pa.field("key", kt), "value": pa.field("value", vt)}
    fields = [given.get(f.name, f) for f in base]
    n = len(records)
    columns: list[Any] = [
        pa.array([r.key for r in records], kt),
        pa.array([r.value for r in records], vt),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records],
                arrow.HEADER_TYPE,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


# -- the sink: rows encoded by the registry's serializers --------------------------------
#
# Which schema id a record gets follows confluent-kafka's serializer defaults: a schema
# given as an option (valueSchema) is registered under the subject if it is not there
# yet (auto.register.schemas, default true, as a producer with a schema in its code
# does); without one the subject's latest version is used (use.latest.version, and
# nothing registered: the sink has no schema of its own to offer then).


@dataclass(frozen=True, slots=True)
class SinkColumn:
    """One encoded column of the sink (picklable): its writer schema and subject."""

    field: str
    format: str
    subject: str | None  # None: <row's topic>-<field> (confluent's topic strategy)
    schema_str: str
    references: tuple[tuple[str, str, int], ...]
    register: bool  # the schema came as an option: auto-register it


@dataclass(frozen=True, slots=True)
class SinkFormats:
    registry: Mapping[str, Any]
    key: ColumnRequest | SinkColumn | None
    value: ColumnRequest | SinkColumn | None


def parse_sink_formats(options: Mapping[str, str], topic: str | None) -> SinkFormats | None:
    """The sink's format options (lower-cased keys), checked without the registry; None
    if both columns are written as given (binary or string)."""
    columns: dict[str, ColumnRequest | None] = {}
    for field in ("key", "value"):
        fmt = (_text(options, f"{field}Format") or "binary").lower()
        if (
            topic is None
            and fmt != "binary"
            and _text(options, f"{field}Subject") is None
            and _text(options, f"{field}Schema") is None
        ):
            raise KafkaConfigError(
                f"{field}Format={fmt} without the topic option: give {field}Schema (registered "
                f"under <topic>-{field} of each row's topic) or {field}Subject"
            )
        req = _column(options, field, topic)
        if req is not None and req.schema is not None and _text(options, f"{field}Subject") is None:
            req = ColumnRequest(req.field, req.format, None, req.schema)  # per row's topic
        columns[field] = req
    conf = registry_conf(options)
    if columns["key"] is None and columns["value"] is None:
        if conf:
            raise KafkaConfigError(
                "schema.registry.* options are set but keyFormat and valueFormat are binary: "
                "set valueFormat (or keyFormat) to avro or json"
            )
        return None
    if "url" not in conf:
        what = "valueFormat" if columns["value"] is not None else "keyFormat"
        raise KafkaConfigError(f"{what} avro/json needs the option schema.registry.url")
    return SinkFormats(conf, columns["key"], columns["value"])


def resolve_sink(formats: SinkFormats) -> SinkFormats:
    """Each column's writer schema: the option's text, or the subject's latest version
    (asks the registry: on the driver, so a wrong URL or subject fails before any task)."""
    return asyncio.run(_resolve_sink(formats))


async def _resolve_sink(formats: SinkFormats) -> SinkFormats:
    from aiokproto.schema_registry import Schema, SchemaRegistryClient

    async with SchemaRegistryClient(dict(formats.registry)) as sr:

        async def one(req: ColumnRequest | SinkColumn | None) -> SinkColumn | None:
            if req is None or isinstance(req, SinkColumn):
                return req
            if req.schema is None:
                assert req.subject is not None
                schema = (await sr.get_latest_version(req.subject)).schema
                if schema.schema_type != req.format.upper():
                    raise KafkaConfigError(
                        f"{req.field}Format is {req.format} but subject {req.subject!r} "
                        f"holds a {schema.schema_type} schema"
                    )
            else:
                schema = Schema(req.schema, req.format.upper())
            refs = tuple((r.name, r.subject, r.version) for r in schema.references)
            return SinkColumn(
                req.field, req.format, req.subject, schema.schema_str, refs, req.schema is not None
            )

        return SinkFormats(formats.registry, await one(formats.key), await one(formats.value))


def to_plain(value: Any, dtype: Any) -> Any:
    """An Arrow ``to_pylist`` value of type ``dtype`` as the serializers take it: maps
    (lists of key/value pairs there) as dicts, at any depth."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: to_plain(v, dtype.item_type) for k, v in value}
    if pa.types.is_struct(dtype):
        return {f.name: to_plain(value[f.name], f.type) for f in dtype}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [to_plain(v, dtype.value_type) for v in value]
    return value


def _plain_needed(dtype: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_plain_needed(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _plain_needed(dtype.value_type)
    return False


def column_values(column: Any) -> list[Any]:
    """An Arrow column's rows as the serializers take them (dicts for structs and maps)."""
    values = column.to_pylist()
    if _plain_needed(column.type):
        return [to_plain(v, column.type) for v in values]
    return list(values)


def _serializer(sr: Any, column: SinkColumn | ColumnRequest | None) -> Any:
    if column is None:
        return None
    assert isinstance(column, SinkColumn), "formats are resolved on the driver"
    from aiokproto.schema_registry import Schema, SchemaReference

    refs = tuple(SchemaReference(*r) for r in column.references)
    schema = Schema(column.schema_str, column.format.upper(), refs)
    conf: dict[str, Any] = (
        {"auto.register.schemas": True}
        if column.register
        else {"auto.register.schemas": False, "use.latest.version": True}
    )
    subject = column.subject
    if subject is not None:
        conf["subject.name.strategy"] = lambda ctx, record_name: subject
    if column.format == "avro":
        from aiokproto.schema_registry.avro import AvroSerializer

        return AvroSerializer(sr, schema, conf=conf)
    from aiokproto.schema_registry.json_schema import JSONSerializer

    return JSONSerializer(schema, sr, conf=conf)


class Encoder:
    """Encodes the key and value columns of the sink's rows (one registry client per
    task, opened on the task's loop)."""

    def __init__(self, formats: SinkFormats, sr: Any) -> None:
        self.key = _serializer(sr, formats.key)
        self.value = _serializer(sr, formats.value)

    async def encode(
        self, values: Sequence[Any], topics: Sequence[str | None], field: str
    ) -> list[bytes | None]:
        from aiokproto.serialization import MessageField, SerializationContext

        serializer = self.key if field == "key" else self.value
        which = MessageField.KEY if field == "key" else MessageField.VALUE
        return [
            await serializer.serialize(v, SerializationContext(t or "", which))
            for v, t in zip(values, topics, strict=True)
        ]
