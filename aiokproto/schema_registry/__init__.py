"""Schema registry support: an async ``SchemaRegistryClient`` and Avro / JSON Schema
serializers and deserializers in the Confluent wire format, with confluent-kafka's
names. Needs ``pip install 'aiokproto[schema-registry]'`` (httpx, fastavro, jsonschema,
protobuf); each format's module is imported on first use, so a missing library only
affects its own format.

The serializers are ``aiokproto.serialization.ContextSerializer`` objects: give them to
the producer as ``value_serializer=``/``key_serializer=`` and it awaits them with the
record's topic, key-or-value field and headers; the deserializers likewise to the
consumers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiokproto.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from aiokproto.schema_registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    NotWireFormatError,
    RegistryUnreachableError,
    SchemaMismatchError,
    SchemaRegistryError,
    SerdeError,
    UnknownSchemaError,
)
from aiokproto.schema_registry.serde import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from aiokproto.serialization import MessageField, SerializationContext

if TYPE_CHECKING:
    from aiokproto.schema_registry.avro import AvroDeserializer, AvroSerializer
    from aiokproto.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from aiokproto.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

_LAZY = {
    "AvroSerializer": "avro",
    "AvroDeserializer": "avro",
    "JSONSerializer": "json_schema",
    "JSONDeserializer": "json_schema",
    "ProtobufSerializer": "protobuf",
    "ProtobufDeserializer": "protobuf",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "JSONDeserializer",
    "JSONSerializer",
    "MessageField",
    "NotWireFormatError",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "RegistryUnreachableError",
    "Schema",
    "SchemaMismatchError",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerdeError",
    "SerializationContext",
    "UnknownSchemaError",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]
