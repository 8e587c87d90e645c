"""Errors only the consumer raises.

``NoOffsetForPartitionError``, ``ConsumerStoppedError`` and ``NoGroupError`` are
defined in ``aiokproto.errors`` (so that module names every error without importing
the consumer) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokproto.errors import (
    ConsumerStoppedError,
    KafkaError,
    NoGroupError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from aiokproto.structs import TopicPartition

__all__ = [
    "ConsumerStoppedError",
    "NoGroupError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeConsumerError",
    "RecordDeserializationError",
]


class OffsetOutOfRangeConsumerError(NoOffsetForPartitionError, OffsetOutOfRangeError):
    """The position is outside the partition's log (deleted or truncated records) and
    ``auto_offset_reset="none"``.

    ``offsets`` maps each partition to the position. It is also ``args[0]``, where
    aiokafka's consumer puts it, and the class is also the broker code's
    ``OffsetOutOfRangeError``, so ``except OffsetOutOfRangeError as e: e.args[0]``
    written for aiokafka works unchanged.
    """

    def __init__(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.offsets = dict(offsets)
        where = ", ".join(f"{tp.topic}-{tp.partition}@{o}" for tp, o in sorted(offsets.items()))
        # str() is NoOffsetForPartitionError's text (no broker code prefix)
        super().__init__(self.offsets, f"the position is out of range ({where})")
        # args are what the constructor takes, so copying and pickling rebuild it.
        self.args = (self.offsets,)


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised. ``seek(tp, offset + 1)`` skips the record."""

    def __init__(self, tp: TopicPartition, offset: int, cause: BaseException) -> None:
        self.tp = tp
        self.offset = offset
        self.cause = cause
        # args are what the constructor takes, so copying and pickling rebuild it
        super().__init__(tp, offset, cause)

    def __str__(self) -> str:
        tp, cause = self.tp, self.cause
        return (
            f"deserializing the record at {tp.topic}-{tp.partition} offset {self.offset} "
            f"failed: {type(cause).__name__}: {cause}; seek past it to skip it"
        )
