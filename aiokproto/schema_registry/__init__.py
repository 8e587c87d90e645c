"""Schema registry support: an async ``SchemaRegistryClient`` and Avro / JSON Schema
serializers and deserializers in the Confluent wire format, with confluent-kafka's
names. Needs ``pip install 'aiokproto[schema-registry]'`` (httpx, fastavro, jsonschema).

The serializers are ``aiokproto.serialization.ContextSerializer`` objects: give them to
the producer as ``value_serializer=``/``key_serializer=`` and it awaits them with the
record's topic, key-or-value field and headers; the deserializers likewise to the
consumers.
"""

from __future__ import annotations

from aiokproto.schema_registry.avro import AvroDeserializer, AvroSerializer
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
from aiokproto.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from aiokproto.schema_registry.serde import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from aiokproto.serialization import MessageField, SerializationContext

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "JSONDeserializer",
    "JSONSerializer",
    "MessageField",
    "NotWireFormatError",
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
