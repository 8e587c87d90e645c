"""The schema registry's typed errors: what the registry answered (unknown id/subject/
version, incompatible or invalid schema), a registry nobody could reach (naming every
URL tried), and the serdes' own (a payload not in the wire format, a record that does
not match its schema, with the field path)."""

from __future__ import annotations

from aiokproto.error_families import KafkaConnectionError, KafkaError


class SchemaRegistryError(KafkaError):
    """The registry answered with an error. ``status`` is the HTTP status, ``error_code``
    the registry's own code (e.g. 40403), ``None`` when the body had none."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None):
        self.status = status
        self.error_code = error_code
        super().__init__(message)


class UnknownSchemaError(SchemaRegistryError):
    """No such schema id, subject or version (HTTP 404)."""


class IncompatibleSchemaError(SchemaRegistryError):
    """The schema breaks the subject's compatibility rule (HTTP 409)."""


class InvalidSchemaError(SchemaRegistryError):
    """The registry (or the serializer) could not parse the schema (HTTP 422)."""


class RegistryUnreachableError(SchemaRegistryError, KafkaConnectionError):
    """No URL answered (connection refused, timeout, TLS failure), or each kept
    answering 429/5xx through every retry. ``urls``: each URL tried."""

    def __init__(self, message: str, urls: tuple[str, ...]) -> None:
        self.urls = urls
        super().__init__(message)


class SerdeError(KafkaError, ValueError):
    """Base of the serializers' and deserializers' own errors."""


class NotWireFormatError(SerdeError):
    """The payload does not start with the wire format's magic byte 0 and a schema id."""


class SchemaMismatchError(SerdeError):
    """A record does not match its schema; ``path`` names the field (``"$.items[2].sku"``)."""

    def __init__(self, message: str, path: str) -> None:
        self.path = path
        super().__init__(message)
