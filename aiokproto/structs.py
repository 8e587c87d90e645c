"""Small value types shared by the producer, consumer and admin APIs.

aiokafka's ``aiokafka.structs`` also has ``ConsumerRecord``, ``OffsetAndTimestamp``
and ``RecordMetadata``; they are here too (loaded on first use: they live in the
consumer and producer packages, which import this module).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from aiokproto.consumer.record import ConsumerRecord as ConsumerRecord
    from aiokproto.consumer.record import OffsetAndTimestamp as OffsetAndTimestamp
    from aiokproto.producer.delivery import RecordMetadata as RecordMetadata

__all__ = [
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
]

# name -> module that defines it (imported lazily: both import this module)
_ELSEWHERE = {
    "ConsumerRecord": "aiokproto.consumer.record",
    "OffsetAndTimestamp": "aiokproto.consumer.record",
    "RecordMetadata": "aiokproto.producer.delivery",
}


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed (or to-be-committed) position: the next offset to consume.

    ``leader_epoch`` is the epoch of the last consumed record (-1 if unknown); brokers
    use it to detect log truncation (KIP-320).
    """

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A group member as the broker knows it, from ``Consumer.group_metadata()``.

    ``Producer.send_offsets_to_transaction`` sends it with the offsets, so a member the
    group has moved past (a zombie) cannot commit them (KIP-447). ``generation_id`` is
    -1 and ``member_id`` empty until the member has joined.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
