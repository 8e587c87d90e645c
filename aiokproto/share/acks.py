"""Acknowledgements of a share consumer (KIP-932), without I/O.

A share fetch *acquires* records for this member: the broker answers with record
batches and ``AcquiredRecords`` ranges (first, last offset, delivery count). Only the
records inside those ranges are this member's; an acquired offset with no record in
the data (a transaction marker, a compacted or aborted record) is acknowledged as a
GAP. Every acquired offset is eventually acknowledged once: ACCEPT (done), RELEASE
(give it back now; delivered again, delivery count + 1), REJECT (never again), or it
is released by the broker when the acquisition lock expires. RENEW extends the lock
and keeps the record acquired.

``AckBook`` keeps, per partition, the acquired offsets not acknowledged yet and the
acknowledgements waiting to be sent; ``to_batches`` turns those into the wire form.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokproto.errors import KafkaConfigError
from aiokproto.structs import TopicPartition


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


#: what ``ShareConsumer.acknowledge`` takes, by name
ACK_NAMES: Mapping[str, AcknowledgeType] = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
    "renew": AcknowledgeType.RENEW,
}


def ack_type(value: object) -> AcknowledgeType:
    """An acknowledgement type from its name or enum value (GAP is the client's own)."""
    if isinstance(value, AcknowledgeType) and value is not AcknowledgeType.GAP:
        return value
    if isinstance(value, str) and value.lower() in ACK_NAMES:
        return ACK_NAMES[value.lower()]
    raise KafkaConfigError(
        f"acknowledgement type must be one of {', '.join(ACK_NAMES)}, not {value!r}"
    )


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One ``AcknowledgementBatch``: offsets first..last with one type for all, or one
    type per offset."""

    first: int
    last: int
    types: tuple[int, ...]


def to_batches(acks: Mapping[int, AcknowledgeType]) -> list[AckBatch]:
    """Contiguous runs of offsets, each run of one type as a single-type batch (the
    broker takes a one-element type list for the whole range)."""
    out: list[AckBatch] = []
    first = last = -2
    kind = -1
    for offset in sorted(acks):
        t = int(acks[offset])
        if offset == last + 1 and t == kind:
            last = offset
            continue
        if kind >= 0:
            out.append(AckBatch(first, last, (kind,)))
        first = last = offset
        kind = t
    if kind >= 0:
        out.append(AckBatch(first, last, (kind,)))
    return out


class PartitionAcks:
    """One partition: acquired offsets still ours, and acknowledgements to send."""

    __slots__ = ("acquired", "node", "pending", "renewing")

    def __init__(self, node: int) -> None:
        self.node = node  # the leader the records were acquired from: acks go there
        self.acquired: set[int] = set()
        self.pending: dict[int, AcknowledgeType] = {}
        self.renewing = False


class AckBook:
    """Acquired offsets and pending acknowledgements of every partition."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, PartitionAcks] = {}

    def acquired(self, tp: TopicPartition, node: int, offsets: Iterable[int]) -> None:
        part = self._parts.get(tp)
        if part is None or part.node != node:
            part = self._parts[tp] = PartitionAcks(node)
        part.acquired.update(offsets)

    def holds(self, tp: TopicPartition, offset: int) -> bool:
        part = self._parts.get(tp)
        return part is not None and offset in part.acquired

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Queue ``kind`` for an acquired offset (RENEW keeps it acquired)."""
        part = self._parts.get(tp)
        if part is None or offset not in part.acquired:
            raise KafkaConfigError(f"{tp}@{offset} is not a record this consumer holds")
        part.pending[offset] = kind
        if kind is not AcknowledgeType.RENEW:
            part.acquired.discard(offset)

    def expire(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Offsets whose acquisition lock ran out before they were handed out: the
        broker took them back (another member may hold them now), so they are not
        ours to acknowledge."""
        part = self._parts.get(tp)
        if part is not None:
            part.acquired.difference_update(offsets)

    def pending_for(self, node: int) -> dict[TopicPartition, dict[int, AcknowledgeType]]:
        """Take the acknowledgements waiting for ``node`` (they are now in flight)."""
        out: dict[TopicPartition, dict[int, AcknowledgeType]] = {}
        for tp, part in self._parts.items():
            if part.node == node and part.pending:
                out[tp] = part.pending
                part.pending = {}
        return out

    def has_pending(self, node: int | None = None) -> bool:
        return any(p.pending and (node is None or p.node == node) for p in self._parts.values())

    def nodes_with_pending(self) -> set[int]:
        return {p.node for p in self._parts.values() if p.pending}

    def held(self) -> dict[TopicPartition, frozenset[int]]:
        return {tp: frozenset(p.acquired) for tp, p in self._parts.items() if p.acquired}

    def drop(self, tp: TopicPartition) -> PartitionAcks | None:
        return self._parts.pop(tp, None)

    def node_of(self, tp: TopicPartition) -> int | None:
        part = self._parts.get(tp)
        return None if part is None else part.node

    def forget_node(self, node: int) -> dict[TopicPartition, dict[int, AcknowledgeType]]:
        """The leader moved or its session is gone: what was acquired there cannot be
        acknowledged any more (the locks expire and the records come back). Returns
        the acknowledgements that were waiting, to report as failed."""
        lost: dict[TopicPartition, dict[int, AcknowledgeType]] = {}
        for tp in [tp for tp, p in self._parts.items() if p.node == node]:
            part = self._parts.pop(tp)
            if part.pending:
                lost[tp] = part.pending
        return lost
