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
