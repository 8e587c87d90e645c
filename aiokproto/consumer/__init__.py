"""The consumer: fetcher, subscription state, the ``Consumer`` API and the group task."""

from aiokproto.consumer.consumer import Consumer
from aiokproto.consumer.errors import (
    ConsumerStoppedError,
    NoGroupError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeConsumerError,
    RecordDeserializationError,
    UndecodableBatchError,
)
from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.consumer.record import ConsumerRecord, OffsetAndTimestamp
from aiokproto.errors import CommitFailedError

__all__ = [
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "NoGroupError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeConsumerError",
    "RecordDeserializationError",
    "UndecodableBatchError",
]
