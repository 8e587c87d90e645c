"""The record type every batch format decodes into."""

from __future__ import annotations

from typing import Final, NamedTuple

#: ``timestamp_type`` values (attribute bit 3 of a batch / v1 message).
CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1
#: v0 messages have no timestamp at all.
NO_TIMESTAMP_TYPE: Final = -1

Header = tuple[str, bytes | None]
#: A record's headers: an immutable tuple, so records without headers share ``()``.
Headers = tuple[Header, ...]


class Record(NamedTuple):
    """One decoded record.

    A tuple underneath so a batch of them is built in C-speed steps; ``offset`` is
    absolute, ``timestamp`` is absolute milliseconds (``-1`` for v0 messages; the
    batch's max timestamp for every record of a LogAppendTime batch). ``headers`` is
    a tuple (``()`` when there are none): no per-record list to allocate and for the
    garbage collector to track, and records stay immutable.
    """

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Headers
