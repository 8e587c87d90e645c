"""The record checks shared by ``Producer.send()`` and ``BatchBuilder.append()``
(key/value/headers as bytes, serializer calls) and ``SerializationError``.

Key, value and headers must be bytes (or pass a serializer): each check raises
``SerializationError`` before anything malformed reaches a batch. Its own module so
that ``producer.py`` and ``batch_builder.py`` both use it without importing each other.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from aiokproto.errors import KafkaError
from aiokproto.records.record import Header


class SerializationError(KafkaError, TypeError):
    """A key, value or header is not bytes (give a serializer, or encode it yourself)."""


def _header_charge(headers: Sequence[Header]) -> int:
    """The headers' buffer charge; raises ``SerializationError`` unless they are
    (str, bytes-or-None) pairs, so nothing malformed ever reaches a batch."""
    size = 0
    try:
        for hkey, hvalue in headers:
            if not isinstance(hkey, str):
                raise TypeError
            if hvalue is not None and not isinstance(hvalue, (bytes, bytearray)):
                raise TypeError
            size += 2 + len(hkey) * 4 + (0 if hvalue is None else len(hvalue))
    except (TypeError, ValueError):
        raise SerializationError(
            f"headers must be a list of (str, bytes | None) pairs, not {headers!r}"
        ) from None
    return size


def _as_bytes(data: Any, what: str) -> bytes | bytearray:
    """``data`` (not None and not bytes: the fast path checked) as bytes, or raise."""
    if isinstance(data, bytearray):
        return data
    if isinstance(data, memoryview):
        return data.tobytes()
    if inspect.iscoroutine(data):
        data.close()  # never awaited: no "never awaited" warning on top of the error
        raise SerializationError(
            f"the record {what} is a coroutine (a {what}_serializer that returns one?): a "
            f"plain {what}_serializer is not awaited; subclass "
            "aiokproto.serialization.ContextSerializer for one that awaits"
        )
    raise SerializationError(
        f"the record {what} must be bytes, bytearray, memoryview or None, not "
        f"{type(data).__name__}; pass {what}_serializer= or encode it yourself"
    )


def _listed_headers(headers: Any) -> list[Header]:
    try:
        return list(headers)
    except TypeError:
        raise SerializationError(
            f"headers must be a list of (str, bytes | None) pairs, not {headers!r}"
        ) from None


async def _serialize_ctx(serializer: Any, data: Any, ctx: Any, what: str) -> Any:
    """``await serializer(data, ctx)``; its own KafkaErrors (a registry's typed
    errors) pass through as they are."""
    try:
        return await serializer(data, ctx)
    except KafkaError:
        raise
    except Exception as exc:
        raise SerializationError(f"the {what}_serializer raised {exc!r}") from exc


def _serialize(serializer: Any, data: Any, what: str) -> Any:
    try:
        return serializer(data)
    except Exception as exc:
        raise SerializationError(f"the {what}_serializer raised {exc!r}") from exc
