"""The record accumulator: per-partition batches, ``buffer_memory`` accounting, draining
into per-broker requests, expiry. No I/O, but not pure: a new batch reads the event
loop's clock for its creation time and deadline, and gets its future from the loop;
draining and expiry take ``now`` from the caller.

``drain`` takes ``now`` (event-loop time) and a leader lookup, and gives back which
batches to send to which broker. Batches are drained one per partition per request
(the broker accepts one batch per partition in a v3+ Produce), up to
``max_in_flight_requests_per_connection`` requests per broker and per partition.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from aiokproto.errors import KafkaError, KafkaTimeoutError
from aiokproto.producer.batch import (
    NO_IDENTITY,
    NO_SEQUENCE,
    BatchResult,
    PartitionQueue,
    ProducerBatch,
    ProducerIdentity,
    Split,
    increment_sequence,
    settle_parents,
    split_records,
)
from aiokproto.producer.delivery import DeliveryFuture, append_to
from aiokproto.producer.options import BATCH_HEADER, ProducerOptions
from aiokproto.records import RecordBatchBuilder
from aiokproto.records.record import Header

if TYPE_CHECKING:
    from aiokproto.metrics.producer import ProducerMetrics

log = logging.getLogger(__name__)

#: buffer_memory charged per record on top of its key, value and header bytes
RECORD_CHARGE: Final = 16
#: bytes of a Produce request besides the batches (headers, names, partition fields)
_REQUEST_OVERHEAD: Final = 64
_PARTITION_OVERHEAD: Final = 32

LeaderOf = Callable[[str, int], int | None]

#: requests a broker may have out before a lingered batch that is not full waits for
#: one to end (``Accumulator.drain``): one being handled and one queued behind it
PATIENT_DEPTH: Final = 2


class DrainResult:
    """What to send now, and when to look again."""

    __slots__ = ("leaderless", "next_wake", "requests", "reset_wanted")

    def __init__(self) -> None:
        self.requests: list[tuple[int, list[ProducerBatch]]] = []
        self.next_wake: float | None = None  # loop time of the next linger/backoff/expiry
        # topics of ready batches with no known leader (a refresh asks for these alone)
        self.leaderless: set[str] | None = None
        self.reset_wanted = False  # a partition waits for a new producer epoch

    def wake_at(self, when: float) -> None:
        if self.next_wake is None or when < self.next_wake:
            self.next_wake = when


class Accumulator:
    """Owns every batch from the first append until its future is resolved."""

    # read and written by send()'s compiled common case (accel: bind_send)
    __slots__ = ("__dict__", "__weakref__", "limit", "used")

    def __init__(
        self,
        options: ProducerOptions,
        loop: asyncio.AbstractEventLoop,
        wake: Callable[[], None],
        released: Callable[[], None],
        metrics: ProducerMetrics | None = None,
        wake_by: Callable[[float], None] | None = None,
    ) -> None:
        self.options = options
        self.metrics = metrics
        self._loop = loop
        self._wake = wake  # a batch became ready or was created: the sender looks again
        # a new batch lingers until then: the sender needs a pass by that time only (a
        # pass per new batch scanned every queued partition: at 1,000 partitions that
        # scan was most of the producer's CPU)
        self._wake_by = wake_by
        self._released = released  # buffer memory was freed
        self._linger = options.linger_ms / 1000
        self._delivery = options.delivery_timeout_ms / 1000
        self.queues: dict[str, dict[int, PartitionQueue]] = {}
        self._all: list[PartitionQueue] = []
        self._active: dict[PartitionQueue, None] = {}  # partitions with queued batches
        # Partitions whose only batch is new and lingers, in the order their linger ends
        # (linger_ms is the same for all, batches are created in time order): the drain
        # looks at them once their linger is over, not at every pass before. Kept apart
        # from _active, since scanning 1,000 lingering partitions at every pass was most
        # of the producer's CPU. (ready at, partition); stale entries are dropped then.
        self._lingering: deque[tuple[float, PartitionQueue]] = deque()
        self.used = 0  # buffer_memory bytes held by unfinished batches
        self.limit = options.buffer_memory
        # no queued batch expires before this loop time (a lower bound: set by each
        # drain, lowered by a batch queued since): the sender skips drains that could
        # send nothing (every broker's in-flight requests full) until then
        self.expiry_due = math.inf
        self.incomplete: set[ProducerBatch] = set()
        self.idempotent = options.enable_idempotence
        self.transactional = options.transactional_id is not None
        # transactions v1: partitions must be added to the transaction before sending
        self.add_partitions = False
        # a batch of the current transaction went out (an EndTxn is then needed)
        self.sent_in_txn = False
        # told of every batch that fails for good (the transaction becomes abortable)
        self.on_fail: Callable[[ProducerBatch, BaseException], None] | None = None
        self.identity = NO_IDENTITY
        # the transaction will not commit (abortable, aborting): a batch coming back
        # for a retry or a split fails with this instead of waiting in a queue
        self.doomed: BaseException | None = None
        self.flushing = 0
        self.closing = False
        self.space_wanted = False
        self._order = 0
        self._rotate = 0
        self._first_sends: list[ProducerBatch] = []  # a drain's batches sent the first time
        # a batch that may go at once whatever is in flight (a full one, a retry, a
        # split's pieces) was queued since the last drain
        self.urgent = False

    # -- appending --------------------------------------------------------------

    def queue(self, topic: str, partition: int) -> PartitionQueue:
        parts = self.queues.get(topic)
        if parts is None:
            parts = self.queues[topic] = {}
        pq = parts.get(partition)
        if pq is None:
            pq = parts[partition] = PartitionQueue(topic, partition, not self.add_partitions)
            self._all.append(pq)
        return pq

    def _new_batch(self, pq: PartitionQueue) -> ProducerBatch:
        """A batch for ``pq``, not yet queued: ``_enqueue`` it once a record is in, so
        an append that raises can never leave an empty batch behind."""
        opts = self.options
        now = self._loop.time()
        return ProducerBatch(
            pq,
            RecordBatchBuilder(
                batch_size=opts.batch_size,
                compression=opts.compression,
                compression_level=opts.compression_level,
                transactional=self.transactional,
            ),
            self._loop.create_future(),
            now,
            now + self._delivery,
            BATCH_HEADER,
        )

    def _enqueue(self, pq: PartitionQueue, batch: ProducerBatch) -> None:
        closing = pq.open
        ready_now = closing is not None  # the batch it closes may go at once
        if closing is not None:
            closing.closed = True
            self.urgent = True
        self.used += BATCH_HEADER
        if batch.deadline < self.expiry_due:
            self.expiry_due = batch.deadline
        alone = not pq.batches
        pq.batches.append(batch)
        pq.open = batch
        pq.last_batch = batch.created
        self.incomplete.add(batch)
        wake_by = self._wake_by
        if (
            ready_now
            or wake_by is None
            or not self._linger
            or self.flushing
            or self.closing
            or self.space_wanted
        ):
            self._active[pq] = None
            self._wake()
        else:
            ready = batch.created + self._linger
            if alone and pq not in self._active:
                self._lingering.append((ready, pq))
            else:
                self._active[pq] = None
            wake_by(ready)

    def append(
        self,
        pq: PartitionQueue,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        charge: int,
    ) -> DeliveryFuture:
        """Add one record (the caller checked its size and waited for memory)."""
        ksize = -1 if key is None else len(key)
        vsize = -1 if value is None else len(value)
        batch = pq.open
        handle = None
        if batch is not None:
            handle = append_to(DeliveryFuture, batch, timestamp, key, value, headers, ksize, vsize)
        if handle is None:
            # no open batch, or it is full: the first record of a new one always fits
            batch = self._new_batch(pq)
            handle = append_to(DeliveryFuture, batch, timestamp, key, value, headers, ksize, vsize)
            assert handle is not None
            self._enqueue(pq, batch)
        assert batch is not None
        batch.charge += charge
        self.used += charge
        return handle

    def append_many(
        self,
        pq: PartitionQueue,
        timestamp: int,
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        charges: Sequence[int],
        start: int,
        stop: int,
        headers: Sequence[Header] | None,
    ) -> list[tuple[ProducerBatch, int, int, int]]:
        """Append ``values[start:stop]`` (and keys) to one partition, charging
        ``charges[i]`` each; returns segments ``(batch, start_index, first_delta,
        count)``. The caller checked memory."""
        segments: list[tuple[ProducerBatch, int, int, int]] = []
        batch = pq.open
        queued = batch is not None
        if batch is None:
            batch = self._new_batch(pq)
        i = start
        while i < stop:
            first = batch.builder.record_count
            done = batch.builder.append_many(timestamp, keys, values, i, stop, headers)
            if done:
                segments.append((batch, i, first, done))
                charge = sum(charges[i : i + done])
                batch.charge += charge
                self.used += charge
                if not queued:
                    self._enqueue(pq, batch)
                    queued = True
                i += done
            if i < stop:  # full: the rest goes to a new batch (its first record fits)
                batch = self._new_batch(pq)
                queued = False
        return segments

    # -- draining ---------------------------------------------------------------

    @property
    def patient(self) -> bool:
        """Whether a batch not yet full waits for its broker's requests to end (see
        ``drain``): lingering is on and nobody waits for the buffer to empty."""
        return bool(self._linger) and not (self.flushing or self.closing or self.space_wanted)

    @property
    def has_queued(self) -> bool:
        """Whether any partition has a batch waiting to be sent (a drain with none
        returns an empty plan)."""
        return bool(self._active or self._lingering)

    def drain(
        self,
        now: float,
        leader_of: LeaderOf,
        capacity: Callable[[int], int],
        out: Callable[[int], int] | None = None,
    ) -> DrainResult:
        """Take the batches that are ready and may be sent now, grouped per broker into
        requests (at most ``capacity(node)`` requests per broker). ``leader_of``'s
        answers are kept per partition for as long as it is the same object: pass a new
        one when leaders may have changed (the sender passes one per metadata
        snapshot).

        With ``out(node)`` (the broker's requests in flight), a batch that is not full
        and whose linger is over waits while its broker has ``PATIENT_DEPTH`` requests
        out (linger_ms on, nobody hurrying): the broker handles one request per
        connection at a time, so a third request of lingered batches would only wait
        there while its batches could still grow. At 1,000 partitions five such
        requests in a row made batches 2-3x smaller (CPU per record +40%) for no gain
        in wall time; one alone left the broker idle between requests (1 KB records in
        1 MB batches: -40% MB/s). Full batches, retries and split pieces still go up
        to ``capacity`` requests deep."""
        result = DrainResult()
        hurry = bool(self.flushing or self.closing or self.space_wanted)
        self.urgent = False
        patient = out is not None and bool(self._linger) and not hurry
        busy_by_node: dict[int, bool] = {}
        waiting = self._lingering
        # (a partition whose batch went meanwhile, purged or aborted, is dropped too:
        # else it armed a pass at its linger's end and kept has_queued true till then)
        while waiting and (hurry or waiting[0][0] <= now or not waiting[0][1].batches):
            _, pq = waiting.popleft()
            if pq.batches:
                self._active[pq] = None
        if waiting:
            result.wake_at(waiting[0][0])
        queues = list(self._active)
        n = len(queues)
        if not n:
            return result
        opts = self.options
        linger = self._linger
        idempotent = self.idempotent
        identity = self.identity
        max_in_flight = opts.max_in_flight
        rounds_by_node: dict[int, list[list[ProducerBatch]]] = {}
        left_by_node: dict[int, int] = {}
        self._rotate = start = (self._rotate + 1) % n  # no partition always goes first
        lingering = math.inf  # the soonest a lingering batch is ready
        looked: list[PartitionQueue] = []  # partitions past the lingering fast path
        for j in range(n):
            pq = queues[(start + j) % n]
            # The common case with many partitions, inline: the partition's only batch
            # is open, lingering, and far from its deadline. Its deadline is later than
            # its linger's end (delivery_timeout_ms > linger_ms), so the pass that ends
            # the linger watches the deadline too.
            head = pq.open
            if head is not None and not hurry and pq.batches and pq.batches[0] is head:
                ready = head.created + linger
                if ready > now and head.retry_at <= now and head.deadline > now:
                    if ready < lingering:
                        lingering = ready
                    continue
            looked.append(pq)
            if pq.batches and pq.batches[0].deadline <= now:
                self._expire(pq, now)
            # read after: a failure may fail the rest (fail_unsent, in a transaction
            # turned abortable), which replaces the queue
            batches = pq.batches
            if not batches:
                del self._active[pq]
                continue
            if not pq.txn_added:
                continue  # sent once the transaction has the partition; that wakes us
            head = batches[0]
            if head.retry_at > now:
                result.wake_at(head.retry_at)
                continue
            if head is pq.open and not hurry and head.created + linger > now:
                result.wake_at(head.created + linger)
                continue
            if pq.leader_from is leader_of:
                leader = pq.leader
            else:
                leader = pq.leader = leader_of(pq.topic, pq.partition)
                pq.leader_from = leader_of
            if leader is None:
                if result.leaderless is None:
                    result.leaderless = set()
                result.leaderless.add(pq.topic)
                continue
            if pq.in_flight and pq.node != leader:
                continue  # the leader moved: let what is in flight at the old one settle
            left = left_by_node.get(leader)
            if left is None:
                left = left_by_node[leader] = capacity(leader)
            if left <= 0:
                continue  # the broker's in-flight requests are full; a completion wakes us
            if idempotent and not pq.maybe_adopt(identity):
                if pq.needs_reset and pq.identity == identity:
                    result.reset_wanted = True
                continue
            rounds = rounds_by_node.setdefault(leader, [])
            allowance = min(left, max_in_flight - pq.in_flight)
            if idempotent and not pq.confirmed:
                allowance = min(allowance, 1 - pq.in_flight)  # see PartitionQueue.confirmed
            taken = 0
            while taken < allowance and batches:
                batch = batches[0]
                if batch.order >= 0 and (taken or pq.in_flight):
                    break  # a retry goes alone, after everything before it is resolved
                if batch.retry_at > now:
                    result.wake_at(batch.retry_at)
                    break
                if batch is pq.open:
                    if not hurry and batch.created + linger > now:
                        result.wake_at(batch.created + linger)
                        break
                    if patient:
                        busy = busy_by_node.get(leader)
                        if busy is None:
                            assert out is not None
                            busy = busy_by_node[leader] = out(leader) >= PATIENT_DEPTH
                        if busy:
                            break  # the end of the broker's request wakes the loop
                    pq.open = None
                batches.popleft()
                if pq.split_limit and batch.order < 0 and self._cut(batch):
                    batch = batches.popleft()  # its first piece
                if not self._prepare(pq, batch, idempotent):
                    batches = pq.batches  # (as after _expire)
                    continue
                pq.node = leader
                if taken == len(rounds):
                    rounds.append([])
                rounds[taken].append(batch)
                taken += 1
                if batch.attempts > 1:
                    break
            if not batches:
                del self._active[pq]
        # Wake for the earliest expiry among the batches left unsent, looked at after
        # the taking: a deadline of a batch taken just now would arm a timer on every
        # drain (delivery_timeout_ms away) only to be cancelled at the next.
        due = math.inf  # a min inline: a wake_at() call per partition cost twice as much
        urgent = False
        for pq in looked:
            queued = pq.batches
            if queued:
                head = queued[0]
                if head.deadline < due:
                    due = head.deadline
                if head is not pq.open:
                    urgent = True  # left behind, though it need not wait for anything
        if urgent:
            self.urgent = True
        soonest = min(lingering, due)
        if soonest != math.inf:
            result.wake_at(soonest)
        # a lingering batch's deadline is delivery_timeout_ms after its creation
        to_deadline = self._delivery - linger
        if waiting:
            lingering = min(lingering, waiting[0][0])
        self.expiry_due = min(due, lingering + to_deadline)
        sent = self._first_sends
        if sent:
            assert self.metrics is not None
            self._first_sends = []
            self.metrics.batches_sent(sent, self._loop.time())
        limit = opts.max_request_size
        for node, rounds in rounds_by_node.items():
            for round_ in rounds:
                result.requests.extend((node, chunk) for chunk in _split(round_, limit))
        return result

    def _prepare(self, pq: PartitionQueue, batch: ProducerBatch, idempotent: bool) -> bool:
        """Number and build a batch about to be sent; False if it cannot be built (it
        failed alone: one bad batch must not stop the sender)."""
        batch.closed = True
        if idempotent and batch.sequence == NO_SEQUENCE:
            pq.assign_sequence(batch)
            batch.payload = None
        if batch.order < 0:
            batch.order = self._order
            self._order += 1
        if batch.payload is None:
            try:
                batch.payload = batch.builder.build()
            except Exception as exc:
                error = KafkaError(
                    f"cannot build the record batch for {batch.topic}[{batch.partition}]: {exc!r}"
                )
                error.__cause__ = exc
                self.fail(batch, error)
                return False
        batch.in_flight = True
        batch.attempts += 1
        pq.in_flight += 1
        if self.metrics is not None and batch.attempts > batch.metered:
            batch.metered = batch.attempts
            if batch.attempts == 1:
                self._first_sends.append(batch)  # counted together at the drain's end
            else:
                self.metrics.batch_retried(batch)
        self.sent_in_txn = self.transactional
        return True

    def _expire(self, pq: PartitionQueue, now: float) -> None:
        batches = pq.batches
        while batches and batches[0].deadline <= now:
            batch = batches.popleft()
            if batch is pq.open:
                pq.open = None
            last = f"; last error: {batch.last_error}" if batch.last_error else ""
            self.fail(
                batch,
                KafkaTimeoutError(
                    f"{batch.record_count} record(s) for {batch.topic}[{batch.partition}] "
                    f"expired after {self.options.delivery_timeout_ms} ms "
                    f"(delivery_timeout_ms) without being delivered{last}"
                ),
            )

    # -- outcomes ---------------------------------------------------------------

    def _finish(self, batch: ProducerBatch) -> bool:
        """Bookkeeping shared by success and failure; False if already finished."""
        try:
            self.incomplete.remove(batch)
        except KeyError:
            return False
        pq = batch.queue
        if batch.in_flight:
            batch.in_flight = False
            pq.in_flight -= 1
        batch.conn = None
        self.used -= batch.charge
        batch.payload = None
        self._released()
        return True

    def complete(self, batch: ProducerBatch, result: BatchResult) -> None:
        if not self._finish(batch):
            return
        pq = batch.queue
        pq.resolved(batch)
        if batch.builder.producer_id == pq.identity.producer_id >= 0:
            pq.confirmed = True  # the leader knows this producer now
        if not batch.future.done():
            batch.future.set_result(result)
            if batch.parent is not None:
                settle_parents(batch)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail a batch for good (it must not be in a queue)."""
        if not self._finish(batch):
            return
        pq = batch.queue
        if self.idempotent and batch.sequence != NO_SEQUENCE:
            pq.resolved(batch)
            pq.needs_reset = True  # its sequence numbers will never be acknowledged
        if self.metrics is not None:
            self.metrics.batch_failed(batch)
        if not batch.future.done():
            batch.future.set_exception(error)
            batch.future.exception()  # a record handle may never be awaited
            if batch.parent is not None:
                settle_parents(batch)
        if self.on_fail is not None:
            self.on_fail(batch, error)

    def fail_refused(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail a batch the broker refused (an error in its answer: nothing of it was
        written). When it is the partition's only unresolved batch and the last one
        numbered, its sequence numbers are taken back: no gap, so no epoch bump (a
        producer whose every batch is refused, one at a time, keeps its epoch). Only
        after its first attempt: an earlier one may have been written unanswered."""
        pq = batch.queue
        if (
            self.idempotent
            and batch.attempts == 1
            and batch.sequence != NO_SEQUENCE
            and len(pq.unresolved) == 1
            and pq.unresolved[0] is batch
            and not pq.needs_reset
            and batch.builder.producer_epoch == pq.identity.epoch
            and batch.builder.producer_id == pq.identity.producer_id
            and increment_sequence(batch.sequence, batch.record_count) == pq.next_sequence
        ):
            pq.next_sequence = batch.sequence
            pq.unresolved.clear()
            batch.sequence = NO_SEQUENCE
        self.fail(batch, error)

    def retry(self, batch: ProducerBatch, error: KafkaError, retry_at: float) -> None:
        """Put an in-flight batch back in its queue to be sent again at ``retry_at``."""
        if batch in self.incomplete:
            if self.doomed is not None:
                self.fail(batch, self.doomed)
                return
            batch.last_error = error
            batch.retry_at = retry_at
            self._requeue(batch)

    def _cut(self, batch: ProducerBatch) -> bool:
        """Before a batch first goes: cut it to its partition's learned limit if it is
        over it (the broker refused a batch of that size already: sending it would cost
        a refused request). True if it was cut, its pieces at the head of the queue."""
        if self.doomed is not None or batch.record_count < 2:
            return False  # (a doomed split would fail the batch the drain is taking)
        if batch.builder.estimated_size <= batch.queue.split_limit:
            return False
        try:
            payload = batch.builder.build()
        except Exception:  # _prepare builds it again and fails it, visibly
            return False
        if len(payload) <= batch.queue.split_limit:
            return False
        try:
            return self.split(batch, payload) > 0
        except Exception:  # cannot be cut (it decodes before anything changes): send it
            log.exception("%s: cannot be cut to %d bytes", batch, batch.queue.split_limit)
            return False

    def split(self, batch: ProducerBatch, unsent: bytes | bytearray | None = None) -> int:
        """Cut an in-flight batch the broker refused as too large (two or more records)
        into pieces queued in its place, in order, as if never sent; returns how many.
        With ``unsent`` (its built bytes), a batch about to be sent for the first time
        is cut to the learned limit instead (its pieces go like new batches).

        The pieces take over the batch's buffer memory, deadline, drain order and (the
        refused batch was not written) its sequence range under the same producer id
        and epoch. Each piece is at most half the smallest size refused on this
        partition so far: a limit learned from the refusals, so later batches are cut
        once to the right size instead of halved again and again."""
        if self.doomed is not None:
            self.fail(batch, self.doomed)
            return 0
        pq = batch.queue
        payload = batch.payload if unsent is None else unsent
        assert payload is not None and batch.split is None
        half = max(len(payload) // 2, 1)
        if unsent is None and (pq.split_limit == 0 or half < pq.split_limit):
            pq.split_limit = half
        opts = self.options
        transactional = self.transactional

        def new_builder(limit: int) -> RecordBatchBuilder:
            return RecordBatchBuilder(
                batch_size=limit,
                compression=opts.compression,
                compression_level=opts.compression_level,
                transactional=transactional,
            )

        parts = split_records(batch.builder, payload, pq.split_limit, new_builder)
        # the batch leaves the books (without releasing memory: its pieces hold it)
        self.incomplete.discard(batch)
        if batch.in_flight:
            batch.in_flight = False
            pq.in_flight -= 1
        batch.conn = None
        batch.payload = None
        sequence = batch.sequence
        try:
            at = pq.unresolved.index(batch) if sequence != NO_SEQUENCE else -1
        except ValueError:
            at = -1  # the partition was reset meanwhile: the pieces are renumbered
        if at >= 0:
            del pq.unresolved[at]
        pid, epoch = batch.builder.producer_id, batch.builder.producer_epoch
        total, left = batch.record_count, batch.charge
        pieces: list[ProducerBatch] = []
        for i, (_, builder) in enumerate(parts):
            count = builder.record_count
            charge = left if i == len(parts) - 1 else batch.charge * count // total
            left -= charge
            piece = ProducerBatch(
                pq, builder, self._loop.create_future(), batch.created, batch.deadline, charge
            )
            piece.closed = True
            piece.order = batch.order  # ahead of every batch drained after the big one
            piece.last_error = batch.last_error
            piece.parent = batch
            if at >= 0:
                piece.sequence = sequence
                builder.set_producer_state(pid, epoch, sequence)
                sequence = increment_sequence(sequence, count)
                pq.unresolved.insert(at + i, piece)
            pieces.append(piece)
            self.incomplete.add(piece)
        pq.requeue_pieces(pieces)
        batch.split = Split([first for first, _ in parts], pieces)
        self._active[pq] = None
        self.urgent = True
        if batch.deadline < self.expiry_due:
            self.expiry_due = batch.deadline
        return len(pieces)

    def hold_back(self, batch: ProducerBatch) -> None:
        """An in-flight batch was not written (an earlier batch of its partition is not
        ahead of it on the same connection): queue it again as if never sent. The
        sender looks again: its request may be out long, and a drain is what watches a
        queued batch's deadline."""
        if batch in self.incomplete:
            if self.doomed is not None:
                self.fail(batch, self.doomed)
                return
            batch.attempts -= 1
            self._requeue(batch)
            self._wake()

    def _requeue(self, batch: ProducerBatch) -> None:
        pq = batch.queue
        if batch.in_flight:
            batch.in_flight = False
            pq.in_flight -= 1
        batch.conn = None
        pq.requeue(batch)
        self._active[pq] = None
        self.urgent = True
        if batch.deadline < self.expiry_due:
            self.expiry_due = batch.deadline

    def fail_unsent(self, error: BaseException, queues: Iterable[PartitionQueue] = ()) -> None:
        """Fail the batches not in flight (of ``queues``, or of every partition): a
        transaction that is being aborted never sends them."""
        for pq in list(queues) or self._all:
            waiting = [b for b in pq.batches if not b.in_flight]
            pq.batches = deque(b for b in pq.batches if b.in_flight)
            pq.open = None
            for batch in waiting:
                self.fail(batch, error)

    def purge(self, error: BaseException) -> int:
        """Fail the batches never handed to the sender (queued, not numbered, never
        sent): their records cannot have been written. A batch in flight or waiting for
        a retry may have been, so it stays. Returns the number of records failed."""
        unsent: list[ProducerBatch] = []
        for pq in self._all:
            found = [b for b in pq.batches if b.attempts == 0 and b.sequence == NO_SEQUENCE]
            if found:
                pq.batches = deque(b for b in pq.batches if b not in found)
                if pq.open in found:
                    pq.open = None
                unsent += found
        # every one out of its queue first: the first failure may end a transaction,
        # which fails what is still queued with TransactionAbortedError
        for batch in unsent:
            self.fail(batch, error)
        return sum(batch.record_count for batch in unsent)

    def undelivered(self) -> int:
        """Records buffered or in flight."""
        return sum(batch.builder.record_count for batch in self.incomplete)

    def fail_all(self, error: BaseException) -> None:
        """Fail every batch still held (shutdown)."""
        for pq in self._all:
            pq.batches.clear()
            pq.open = None
        self._active.clear()
        self._lingering.clear()
        for batch in list(self.incomplete):
            self.fail(batch, error)

    # -- questions --------------------------------------------------------------

    def partition_queues(self) -> list[PartitionQueue]:
        return self._all

    def unsent_or_in_flight(self) -> int:
        return len(self.incomplete)

    def set_identity(self, identity: ProducerIdentity) -> None:
        self.identity = identity


def _split(batches: list[ProducerBatch], limit: int) -> list[list[ProducerBatch]]:
    """Cut one round of batches into requests of at most ``limit`` bytes (each at least
    one batch)."""
    out: list[list[ProducerBatch]] = []
    current: list[ProducerBatch] = []
    size = _REQUEST_OVERHEAD
    for batch in batches:
        assert batch.payload is not None
        need = len(batch.payload) + _PARTITION_OVERHEAD
        if current and size + need > limit:
            out.append(current)
            current, size = [], _REQUEST_OVERHEAD
        current.append(batch)
        size += need
    if current:
        out.append(current)
    return out
