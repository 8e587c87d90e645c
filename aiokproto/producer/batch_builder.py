"""aiokafka's batch interface: ``batch = producer.create_batch()``, ``batch.append(...)``
until it answers None (full), then ``await producer.send_batch(batch, topic,
partition=p)``. The records are checked and serialized when appended; the producer
buffers them all at once (all or nothing) when the batch is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from aiokproto.accel import now_ms
from aiokproto.errors import KafkaConfigError
from aiokproto.producer.accumulator import RECORD_CHARGE
from aiokproto.producer.checks import _as_bytes, _header_charge, _serialize
from aiokproto.producer.options import BATCH_HEADER, RECORD_OVERHEAD_BOUND
from aiokproto.records.record import Header

# a record's overhead besides key, value and headers, as the batch builder counts it
_RECORD_BYTES = RECORD_OVERHEAD_BOUND
_MAX_TIMESTAMP_MS = 2**63 - 1


def _timestamp_ms(timestamp: float | None) -> int:
    """Milliseconds since the epoch for ``timestamp`` in seconds (None: now), checked
    here so that a bad one fails this append, never the record batch it would join."""
    if timestamp is None:
        return now_ms()
    try:
        ms = float(timestamp) * 1000
    except (TypeError, ValueError):
        raise KafkaConfigError(
            f"timestamp must be seconds since the epoch (a number) or None, not {timestamp!r}"
        ) from None
    if not 0 <= ms < _MAX_TIMESTAMP_MS:
        raise KafkaConfigError(
            f"timestamp must be seconds since the epoch, >= 0 and < "
            f"{_MAX_TIMESTAMP_MS / 1000:.0f}, not {timestamp!r}"
        )
    return int(ms)


class BatchAppend(NamedTuple):
    """What ``BatchBuilder.append`` answers: the record's place in the batch."""

    offset: int  # relative: 0 for the batch's first record
    timestamp: int  # milliseconds since the epoch
    size: int  # approximate encoded size in bytes
    crc: None = None  # v2 batches have one CRC for the whole batch


class BuiltRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[Header, ...] | None
    charge: int


class BatchBuilder:
    """Records for one ``send_batch`` call, appended up to ``batch_size`` bytes."""

    def __init__(self, batch_size: int, key_serializer: Any, value_serializer: Any) -> None:
        self._limit = batch_size
        self._size = BATCH_HEADER
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._closed = False
        self.sent = False  # buffered by a send_batch(): sending it again would duplicate
        self.records: list[BuiltRecord] = []

    def append(
        self,
        *,
        timestamp: float | None,
        key: Any,
        value: Any,
        headers: Sequence[Header] | None = None,
    ) -> BatchAppend | None:
        """Add a record (``timestamp`` in seconds since the epoch, None: now); None when
        the batch is full or closed (the first record always fits)."""
        if self._closed:
            return None
        if key is not None and self._key_serializer is not None:
            key = _serialize(self._key_serializer, key, "key")
        if value is not None and self._value_serializer is not None:
            value = _serialize(self._value_serializer, value, "value")
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes(value, "value")
        listed = tuple(headers) if headers else None
        extra = _header_charge(listed) if listed else 0
        ts = _timestamp_ms(timestamp)
        data = (0 if key is None else len(key)) + (0 if value is None else len(value)) + extra
        size = data + _RECORD_BYTES
        if self.records and self._size + size > self._limit:
            self._closed = True
            return None
        self._size += size
        self.records.append(BuiltRecord(key, value, ts, listed, RECORD_CHARGE + data))
        return BatchAppend(len(self.records) - 1, ts, size)

    def close(self) -> None:
        """No more appends (a closed batch can still be sent)."""
        self._closed = True

    def size(self) -> int:
        return self._size

    def record_count(self) -> int:
        return len(self.records)
