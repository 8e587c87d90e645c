"""Small value types shared by the producer, consumer and admin APIs:
``TopicPartition``, ``OffsetAndMetadata``, ``ConsumerGroupMetadata``,
``ConsumerRecord[K, V]``, ``OffsetAndTimestamp``, ``RecordMetadata``, defined here so
that they import no client (``aiokproto.producer`` and ``aiokproto.consumer`` re-export
them).

aiokafka's ``aiokafka.structs`` also has ``ConsumerRecord``, ``OffsetAndTimestamp``
and ``RecordMetadata``; they are defined here, so the clients import this module and
it imports none of them (``aiokproto.consumer`` and ``aiokproto.producer`` re-export
them under their old paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, NamedTuple

from aiokproto._generic import K, V

if TYPE_CHECKING:
    # annotations only: importing aiokproto.records at run time loads every codec
    from aiokproto.records.record import Headers

__all__ = [
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
]


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


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 with acks=0 (the broker says nothing).

    ``timestamp`` is the broker's append time when the topic uses LogAppendTime
    (``timestamp_type`` 1), else the record's own create time. Sizes are -1 for a null
    key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int
    timestamp_type: int = 0  # CreateTime
    log_start_offset: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
