"""Errors only the consumer raises."""

from __future__ import annotations

from collections.abc import Iterable

from aiokproto.errors import IllegalStateError, KafkaError
from aiokproto.structs import TopicPartition


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto_offset_reset="none"`` forbids guessing one.

    ``partitions`` are the partitions concerned; ``seek()`` them (or commit offsets for
    them) and consume again.
    """

    def __init__(self, partitions: Iterable[TopicPartition], why: str) -> None:
        self.partitions = frozenset(partitions)
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(self.partitions))
        super().__init__(
            f"{why} for {names} and auto_offset_reset='none'; seek() to an offset "
            "or use auto_offset_reset='earliest'/'latest'"
        )


class OffsetOutOfRangeConsumerError(NoOffsetForPartitionError):
    """The position is outside the partition's log (deleted or truncated records) and
    ``auto_offset_reset="none"``. ``offsets`` maps each partition to the position."""

    def __init__(self, offsets: dict[TopicPartition, int]) -> None:
        self.offsets = dict(offsets)
        where = ", ".join(f"{tp.topic}-{tp.partition}@{o}" for tp, o in sorted(offsets.items()))
        super().__init__(offsets, f"the position is out of range ({where})")


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised. ``seek(tp, offset + 1)`` skips the record."""

    def __init__(self, tp: TopicPartition, offset: int, cause: BaseException) -> None:
        self.tp = tp
        self.offset = offset
        super().__init__(
            f"deserializing the record at {tp.topic}-{tp.partition} offset {offset} "
            f"failed: {type(cause).__name__}: {cause}; seek past it to skip it"
        )


class ConsumerStoppedError(IllegalStateError):
    """The consumer was stopped: ``getone``/``getmany`` (also ones waiting when
    ``stop()`` was called) raise this; ``async for`` just ends."""


class NoGroupError(IllegalStateError):
    """A group operation (commit, committed) on a consumer created without ``group_id``."""
