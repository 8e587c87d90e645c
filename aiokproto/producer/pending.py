"""Records sent to a topic whose metadata is not known yet (``PendingTopic``).

``send()`` to a new topic does not wait for the topic's metadata (as librdkafka's
"unassigned" queue): the record, serialized and charged to ``buffer_memory``, waits
here in send order and ``send()`` returns its handle at once. One metadata refresh
then asks for every topic pending at that moment (a loop over 500 new topics made one
Metadata request per topic while each send() waited for its own). When the answer
arrives the producer chooses each record's partition and appends it to the real
partition queues in send order (``Producer._place_pending``), and ``settle`` maps
each pending handle onto the record's place there (``Split.at``); when the topic
cannot be used (it does not exist within ``max_block_ms``, not authorized, the
producer stopped) ``fail`` fails every handle with the typed error.

The handles are ordinary ``DeliveryFuture``\\ s over one stand-in batch per topic
(``parent``), never sent. Once placed, each record's handle is done, and its callbacks
run, when its own batch resolves (``delivery.follow_places``); the parent's future
resolves once every batch holding its records is resolved (with the first failed
record's error; ``wait_delivered`` waits for each such record alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokproto.producer.batch import (
    BatchResult,
    PartitionQueue,
    ProducerBatch,
    Split,
    settle_from,
)
from aiokproto.producer.delivery import DeliveryFuture, follow_places
from aiokproto.records.record import Header

#: one pending record: (timestamp_ms, key, value, headers, charge, partition, txn_round)
PendingRecord = tuple[
    int, bytes | None, bytes | None, Sequence[Header] | None, int, int | None, int
]


def detached_batch(
    topic: str, partition: int, loop: asyncio.AbstractEventLoop
) -> ProducerBatch:
    """A batch that is never sent: it only carries handles (and their callbacks)."""
    queue = PartitionQueue(topic, partition)
    return ProducerBatch(queue, None, loop.create_future(), 0.0, 0.0, 0)  # type: ignore[arg-type]


def failed_place(
    topic: str, error: BaseException, loop: asyncio.AbstractEventLoop
) -> tuple[ProducerBatch, int]:
    """Where a pending record that could not be placed (its partition does not exist,
    its transaction ended) is said to be: a detached batch failed with ``error``."""
    batch = detached_batch(topic, -1, loop)
    batch.future.set_exception(error)
    batch.future.exception()  # its handle may never be awaited
    return batch, 0


class PendingTopic:
    """Records waiting for one topic's metadata, in send order."""

    __slots__ = ("charge", "parent", "records", "task", "topic")

    def __init__(self, topic: str, loop: asyncio.AbstractEventLoop) -> None:
        self.topic = topic
        self.parent = detached_batch(topic, -1, loop)
        self.records: list[PendingRecord] = []
        self.charge = 0  # buffer_memory bytes the records hold (reserved by the producer)
        self.task: asyncio.Task[None] | None = None  # waits for the metadata, then places

    def __len__(self) -> int:
        return len(self.records)

    def add(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        charge: int,
        partition: int | None,
        txn_round: int,
    ) -> DeliveryFuture:
        delta = len(self.records)
        self.records.append((timestamp, key, value, headers, charge, partition, txn_round))
        self.charge += charge
        return DeliveryFuture(
            self.parent,
            delta,
            timestamp,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )

    def settle(self, places: list[tuple[ProducerBatch, int]]) -> None:
        """The records were placed (``places[i]``: record i's batch and offset delta
        there): the handles read their outcome there, and the parent resolves once
        every one of those batches is resolved."""
        assert len(places) == len(self.records)
        parent = self.parent
        parent.split = Split([], [], at=places)
        follow_places(parent)
        waiting = {id(b): b for b, _ in places if not b.future.done()}
        split = parent.split
        split.pending = len(waiting)
        if not waiting:
            _resolve(parent, places)
            return

        def one_done(_future: asyncio.Future[BatchResult]) -> None:
            split.pending -= 1
            if not split.pending:
                _resolve(parent, places)

        for batch in waiting.values():
            batch.future.add_done_callback(one_done)

    def fail(self, error: BaseException) -> None:
        """Every record fails with ``error`` (none was placed)."""
        future = self.parent.future
        if not future.done():
            future.set_exception(error)
            future.exception()  # a handle may never be awaited


def _resolve(parent: ProducerBatch, places: list[tuple[ProducerBatch, int]]) -> None:
    """The parent's future once every record's batch is resolved: the first failed
    record's error, else done (each record's own outcome stays in its batch)."""
    settle_from(parent, (batch for batch, _ in places))

