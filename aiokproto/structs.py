"""Small value types shared by the producer, consumer and admin APIs."""

from __future__ import annotations

from typing import NamedTuple


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
