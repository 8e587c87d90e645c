"""What the consumer hands to the application."""

from __future__ import annotations

from typing import Generic, NamedTuple

from aiokproto._generic import K, V
from aiokproto.records.record import Headers


class ConsumerRecord(NamedTuple, Generic[K, V]):
    """One consumed record.

    A named tuple: the consumer builds thousands per fetch in C-speed steps, and reading
    a field is a C-level index. ``headers`` is a tuple of ``(key, value)`` pairs (``()``
    when the record has none); keys are ``str``, values ``bytes`` or ``None``.
    ``key``/``value`` are ``bytes | None`` unless a deserializer was given:
    ``ConsumerRecord[K, V]`` has the types the deserializers return.
    ``timestamp_type`` is 0 (CreateTime) or 1 (LogAppendTime), -1 for v0 messages.
    ``leader_epoch`` is the partition leader epoch the batch was written in (-1 unknown).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K
    value: V
    headers: Headers
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times`` answer: the first offset whose timestamp is >= the query."""

    offset: int
    timestamp: int
    leader_epoch: int = -1
