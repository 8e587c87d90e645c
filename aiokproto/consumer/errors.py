"""Errors only the consumer raises.

``NoOffsetForPartitionError``, ``ConsumerStoppedError`` and ``NoGroupError`` are
defined in ``aiokproto.errors`` (so that module names every error without importing
the consumer) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokproto.errors import (
    ConsumerStoppedError,
    CorruptRecordError,
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
    "UndecodableBatchError",
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


class UndecodableBatchError(CorruptRecordError):
    """A fetched record batch this client cannot decode: its CRC fails, its codec is
    unknown (``cause`` is then ``UnsupportedCompressionTypeError``), it ends inside a
    record, or a record does not parse. ``cause`` is the decoder's error.

    The consumer stops in front of it: the records before it are handed out, then every
    ``getmany``/``getone`` raises this (the position stays at ``position``) until the
    application seeks; ``seek(tp, last_offset + 1)`` skips the batch.
    ``last_offset`` is None when even the batch header is unreadable (its length or
    magic byte is impossible), so where the batch ends is unknown.

    The share consumer (``position`` None) has rejected the batch's acquired records
    when it raises this: no member could decode them either.
    """

    def __init__(
        self,
        tp: TopicPartition,
        first_offset: int,
        last_offset: int | None,
        position: int | None,
        cause: BaseException,
    ) -> None:
        self.tp = tp
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.position = position
        self.cause = cause
        self.__cause__ = cause
        # args are what the constructor takes, so copying and pickling rebuild it
        super().__init__(tp, first_offset, last_offset, position, cause)

    def __str__(self) -> str:
        tp, cause, last = self.tp, self.cause, self.last_offset
        where = f"{tp.topic}-{tp.partition}"
        if last is None:
            span = f"at offset {self.first_offset} (header unreadable, end unknown)"
            skip = "seek past it to skip it"
        else:
            span = f"offsets {self.first_offset}-{last}"
            skip = f"seek to {last + 1} to skip it"
        if self.position is None:
            outcome = "its acquired records were rejected"
        else:
            outcome = f"the position stays at {self.position}; {skip}"
        # a broker code's class (the unknown codec) would add its protocol text
        # ("needs a newer request version"), which is about producing, not this
        detail = getattr(cause, "broker_message", None) or cause
        return (
            f"cannot decode the record batch at {where} {span}: "
            f"{type(cause).__name__}: {detail}; {outcome}"
        )
