"""What the consumer hands to the application: ``ConsumerRecord`` and
``OffsetAndTimestamp``, defined in ``aiokproto.structs`` (issue 32: the value types
there import no client) and importable from here as before."""

from __future__ import annotations

from aiokproto.structs import ConsumerRecord, OffsetAndTimestamp

__all__ = ["ConsumerRecord", "OffsetAndTimestamp"]
