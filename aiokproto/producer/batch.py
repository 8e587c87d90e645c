"""A producer batch (``ProducerBatch``) and the per-partition queue (``PartitionQueue``)
with its sequence/epoch bookkeeping (pure), and ``BatchResult``, the broker's answer for
a batch.

Sequence rules (idempotent producer): a batch gets its base sequence the first time it
is drained and keeps it through retries; the partition's ``unresolved`` deque holds the
sequenced batches not yet acknowledged or failed, in sequence order. A sequenced batch
coming back for retry is re-queued in front, in drain order, and is re-sent only when
nothing else of the partition is in flight, so the broker sees sequences in order.
A batch that fails for good after getting a sequence leaves a gap the broker will not
accept, so the partition ``needs_reset``: once its in-flight requests are over it takes
the producer's next epoch and renumbers its queued batches from 0.

Splitting (KIP-126): a batch the broker refused as too large was not written, so its
pieces (``split_records``) take over its sequence range in order, under the same
producer id and epoch: no gap, no duplicate. The split batch keeps its records'
handles; its ``split`` (``Split``) says which piece holds which record, and its future
resolves once every piece's has (``delivery.settled`` finds a record's piece).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

from aiokproto.errors import KafkaError
from aiokproto.producer.delivery import HandleState
from aiokproto.records import RecordBatch, RecordBatchBuilder

NO_SEQUENCE: Final = -1
_SEQUENCE_MASK: Final = 0x7FFFFFFF


def increment_sequence(sequence: int, count: int) -> int:
    """Sequences are int32 that wrap from 2**31-1 to 0 (as the broker computes them)."""
    return (sequence + count) & _SEQUENCE_MASK


class ProducerIdentity(NamedTuple):
    producer_id: int
    epoch: int


NO_IDENTITY: Final = ProducerIdentity(-1, -1)


class BatchResult(NamedTuple):
    """The broker's answer for one batch."""

    base_offset: int
    log_append_time: int
    log_start_offset: int


#: a split batch's result once every piece is delivered: each record's offset is in
#: its piece (``delivery.settled``)
SPLIT_DONE: Final = BatchResult(-1, -1, -1)


class ProducerBatch:
    """Records of one partition built into one v2 RecordBatch, with one future."""

    __slots__ = (
        "attempts",
        "builder",
        "callbacks",
        "charge",
        "closed",
        "conn",
        "created",
        "deadline",
        "future",
        "handles",
        "in_flight",
        "last_error",
        "metered",
        "order",
        "parent",
        "partition",
        "payload",
        "queue",
        "retry_at",
        "sequence",
        "split",
        "topic",
    )

    def __init__(
        self,
        queue: PartitionQueue,
        builder: RecordBatchBuilder,
        future: asyncio.Future[BatchResult],
        created: float,
        deadline: float,
        charge: int,
    ) -> None:
        self.queue = queue
        self.topic = queue.topic
        self.partition = queue.partition
        self.builder = builder
        self.future = future
        self.created = created
        self.deadline = deadline  # loop time after which delivery gives up
        self.charge = charge  # buffer_memory bytes held until the batch is done
        self.closed = False  # no more appends
        self.in_flight = False
        self.attempts = 0
        self.metered = 0  # the last attempt counted in the metrics (a held-back one
        # goes out again under the same number: not a second send nor a retry)
        self.retry_at = 0.0
        self.sequence = NO_SEQUENCE
        self.order = -1  # drain order, set on the first drain; sorts retries
        self.payload: bytes | bytearray | None = None
        # per-record done callbacks, run in one go when the future resolves (one loop
        # callback per batch instead of one per record): DeliveryFuture.add_done_callback's
        # flat runs of (callback, delta, timestamp, ksize, vsize)
        self.callbacks: list[Any] | None = None
        # per-record handle state once a handle was cancelled or had a callback removed
        self.handles: HandleState | None = None
        self.last_error: KafkaError | None = None
        # the connection its current attempt was handed to (order checks); None else
        self.conn: object | None = None
        # set once the broker refused it as too large and it was cut into pieces
        self.split: Split | None = None
        self.parent: ProducerBatch | None = None  # the split batch it is a piece of

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}[{self.partition}] records={self.record_count} "
            f"seq={self.sequence} attempts={self.attempts}>"
        )


class Split:
    """The pieces a refused batch was cut into: piece ``i`` holds its records
    ``firsts[i]`` to ``firsts[i + 1] - 1`` (a piece may be split again in turn).

    ``at``: instead, record ``i`` is record ``at[i][1]`` of batch ``at[i][0]`` (records
    sent before their topic's metadata was known, placed on its partitions later:
    ``pending.PendingTopic``)."""

    __slots__ = ("at", "firsts", "pending", "pieces")

    def __init__(
        self,
        firsts: list[int],
        pieces: list[ProducerBatch],
        at: list[tuple[ProducerBatch, int]] | None = None,
    ) -> None:
        self.firsts = firsts
        self.pieces = pieces
        self.pending = len(pieces)  # pieces whose future is not resolved yet
        self.at = at


def settle_parents(piece: ProducerBatch) -> None:
    """``piece``'s future was just resolved: resolve the batches it was split from once
    all their pieces are (with the first failed record's error, if any; each record's
    own outcome stays in its piece). At once, not a loop pass later: whoever sees the
    piece done (stop(), flush()) sees its records' fate too."""
    parent = piece.parent
    while parent is not None:
        split = parent.split
        assert split is not None
        split.pending -= 1
        if split.pending:
            return
        settle_from(parent, split.pieces)
        parent = parent.parent


def settle_from(parent: ProducerBatch, pieces: Iterable[ProducerBatch]) -> None:
    """Resolve ``parent`` once its records' batches (``pieces``, all resolved) are:
    the first failed one's error, else done."""
    future = parent.future
    if future.done():
        return
    for each in pieces:
        f = each.future
        error = KafkaError(f"{each} was cancelled") if f.cancelled() else f.exception()
        if error is not None:
            future.set_exception(error)
            future.exception()  # a record handle may never be awaited
            return
    future.set_result(SPLIT_DONE)


def split_records(
    builder: RecordBatchBuilder,
    payload: bytes | bytearray,
    limit: int,
    new_builder: Callable[[int], RecordBatchBuilder],
) -> list[tuple[int, RecordBatchBuilder]]:
    """Cut the records of a built batch into builders of at most ``limit`` payload
    bytes each (a single record larger than that goes alone): ``(first record's delta
    in the old batch, builder)`` in order. Always at least two pieces for two or more
    records, so refusing and splitting again ends at single records.

    ``limit`` is in built (compressed) bytes; the builders count uncompressed ones, so
    it is scaled by the old batch's compression ratio."""
    records = RecordBatch.parse(payload, check_crc=False).records()
    n = len(records)
    if n < 2:
        raise ValueError(f"cannot split a batch of {n} record(s)")
    ratio = max(builder.estimated_size, 1) / max(len(payload), 1)
    raw_limit = max(int(limit * ratio), 1)
    pieces: list[tuple[int, RecordBatchBuilder]] = []
    current: RecordBatchBuilder | None = None
    for i, record in enumerate(records):
        if current is not None and current.append(
            record.timestamp, record.key, record.value, record.headers
        ) is not None:
            continue
        current = new_builder(raw_limit)
        current.append(record.timestamp, record.key, record.value, record.headers)
        pieces.append((i, current))
    if len(pieces) == 1:  # the limit fits them all (compression guessed wrong): halve
        half = n // 2
        pieces = []
        for first, stop in ((0, half), (half, n)):
            current = new_builder(1 << 62)
            for record in records[first:stop]:
                current.append(record.timestamp, record.key, record.value, record.headers)
            pieces.append((first, current))
    return pieces


class PartitionQueue:
    """Batches of one partition waiting to be sent, and what is in flight."""

    __slots__ = (
        "batches",
        "confirmed",
        "identity",
        "in_flight",
        "last_batch",
        "leader",
        "leader_from",
        "needs_reset",
        "next_sequence",
        "node",
        "open",
        "partition",
        "split_limit",
        "topic",
        "txn_added",
        "unresolved",
    )

    def __init__(self, topic: str, partition: int, txn_added: bool = True) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: deque[ProducerBatch] = deque()
        self.open: ProducerBatch | None = None  # the batch records are appended to
        self.in_flight = 0
        self.last_batch = 0.0  # loop time the last batch was opened (idle topics)
        self.identity = NO_IDENTITY
        self.next_sequence = 0
        self.unresolved: deque[ProducerBatch] = deque()
        self.needs_reset = False
        # a batch of this partition was acknowledged under the current producer id: the
        # leader has our producer state. Until then one batch goes at a time, since a
        # leader with no state accepts any first sequence (batches 2..5 could be
        # written before a batch 1 that met NOT_LEADER while leadership arrived)
        self.confirmed = False
        self.node = -1  # the broker its in-flight batches went to
        # False while a transactional producer (v1) has not yet added the partition to
        # its transaction (AddPartitionsToTxn): its batches wait, unsent
        self.txn_added = txn_added
        # built bytes a batch of this partition is cut to after a refusal as too large
        # (half the smallest size refused so far; 0: none refused)
        self.split_limit = 0
        # the drain's leader lookup, kept while the lookup function is the same object
        # (the sender passes one per metadata snapshot)
        self.leader_from: object = None
        self.leader: int | None = None

    # -- idempotence ----------------------------------------------------------

    def has_sequenced_queued(self) -> bool:
        return any(b.sequence != NO_SEQUENCE for b in self.batches)

    def maybe_adopt(self, identity: ProducerIdentity) -> bool:
        """Switch to ``identity`` when safe: nothing in flight and nothing numbered
        under the old one waits for a retry. A reset partition renumbers its queued
        batches. Returns whether the partition may send under its identity now."""
        if identity == self.identity:
            return not self.needs_reset
        if self.in_flight:
            return not self.needs_reset
        if self.needs_reset:
            for batch in self.batches:
                batch.sequence = NO_SEQUENCE
            self.unresolved.clear()
        elif self.has_sequenced_queued():
            return True  # retries must go out under the identity they were numbered with
        if identity.producer_id != self.identity.producer_id or self.needs_reset:
            # the leader may have no state for this producer (a new id, or state it
            # lost); a new epoch of a known id must start at sequence 0 (the leader
            # refuses any other), so pipelining stays safe then
            self.confirmed = False
        self.identity = identity
        self.next_sequence = 0
        self.needs_reset = False
        return True

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Number a batch on its first drain and stamp the builder."""
        batch.sequence = self.next_sequence
        self.next_sequence = increment_sequence(self.next_sequence, batch.record_count)
        self.unresolved.append(batch)
        pid, epoch = self.identity
        batch.builder.set_producer_state(pid, epoch, batch.sequence)

    def follows_on(self, batch: ProducerBatch, conn: object) -> bool:
        """True if every batch numbered before ``batch`` is in flight on ``conn``.

        Only then may ``batch`` be written to ``conn``: the broker sees one TCP stream
        in order, while a batch written anywhere else could arrive first (a new leader
        accepts any first sequence from a producer it has no state for)."""
        for earlier in self.unresolved:
            if earlier is batch:
                return True
            if not earlier.in_flight or earlier.conn is not conn:
                return False
        return True

    def is_first_unresolved(self, batch: ProducerBatch) -> bool:
        return bool(self.unresolved) and self.unresolved[0] is batch

    def resolved(self, batch: ProducerBatch) -> None:
        """The batch is done (acknowledged or failed for good)."""
        unresolved = self.unresolved
        if unresolved and unresolved[0] is batch:
            unresolved.popleft()  # the common case: answers come in sequence order
            return
        try:
            unresolved.remove(batch)
        except ValueError:
            pass

    # -- queue ------------------------------------------------------------------

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a batch back for retry, before newer ones, in drain order. A queued
        batch of the same order is a later piece of the same split (its pieces go one
        at a time, in order): the batch goes before it."""
        batches = self.batches
        index = len(batches)
        for i, other in enumerate(batches):
            if other.order < 0 or other.order >= batch.order:
                index = i
                break
        batches.insert(index, batch)

    def requeue_pieces(self, pieces: list[ProducerBatch]) -> None:
        """Queue the pieces of a split batch (its drain order, in flight alone) where it
        was: after the retries drained before it, before everything else, its later
        siblings (pieces of the same earlier split) included."""
        batches = self.batches
        order = pieces[0].order
        index = len(batches)
        for i, other in enumerate(batches):
            if other.order < 0 or other.order >= order:
                index = i
                break
        for piece in reversed(pieces):
            batches.insert(index, piece)
