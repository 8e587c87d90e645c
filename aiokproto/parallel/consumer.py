"""``ParallelConsumer``: many records of one consumer handled at once, order kept per
key (or partition), offsets committed only where every record below has finished.

One fetch loop (the task running ``run()``) takes batches with ``Consumer.getmany``,
records their offsets (``offsets.PartitionOffsets``) and queues them
(``scheduling.Scheduler``); while the queues are nearly full it waits for the workers to
take a chunk before fetching again (not a record or two per pass). A pool of at most
``max_concurrency`` worker tasks, started as work appears and reused, runs the handler
(no task per record). Queues past their bounds pause the partition's fetching. Commits
(every ``commit_interval_ms``, every ``commit_every_records``, on revoke, on stop) send
each partition's safe offset. A rebalance listener chained in front of the user's drops
revoked partitions' queued records, awaits their in-flight ones (cancelled after
``revoke_timeout_ms``) and commits before the partitions go. Every task is owned:
``run()`` returns only once its workers have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from operator import attrgetter
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiokproto.consumer.listener import ConsumerRebalanceListener
from aiokproto.errors import (
    ConsumerStoppedError,
    IllegalStateError,
    KafkaConfigError,
    KafkaError,
)
from aiokproto.parallel.failures import ON_FAILURE, OnFailure, backoff_s, dead_letter_headers
from aiokproto.parallel.offsets import PartitionOffsets
from aiokproto.parallel.scheduling import ORDERINGS, Ordering, Scheduler
from aiokproto.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from aiokproto.consumer import Consumer
    from aiokproto.producer import Producer

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

Handler = Callable[[ConsumerRecord[K, V]], Awaitable[object]]

#: the metrics group of ``Consumer.metrics()`` a ParallelConsumer publishes under
METRICS_GROUP = "parallel-consumer-metrics"

# consumers a ParallelConsumer is using now: two at once on one consumer would share
# its records, each committing past records only the other has in flight
_IN_USE: weakref.WeakSet[Consumer[Any, Any]] = weakref.WeakSet()

_NOT_CALLED = object()  # (the handler raised before returning anything)

_key_of = attrgetter("key")

# how long one getmany waits: the longest a stop() or a fatal error waits for the
# fetch loop to notice (work itself never waits on it)
_POLL_MS = 100


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _check_int(name: str, value: object, low: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        more = " or None" if optional else ""
        raise KafkaConfigError(
            f"ParallelConsumer: {name} must be an int >= {low}{more}, not {value!r}"
        )


async def _call_listener(
    listener: ConsumerRebalanceListener | None, name: str, partitions: frozenset[TopicPartition]
) -> None:
    if listener is None:
        return
    result = getattr(listener, name)(partitions)
    if inspect.isawaitable(result):  # plain methods are fine too, as for the consumer
        await result


class _Chained(ConsumerRebalanceListener):
    """Ours first (give the partitions back safely), then the user's listener."""

    def __init__(self, owner: ParallelConsumer[Any, Any], user: ConsumerRebalanceListener | None):
        self.owner = owner
        self.user = user

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        try:
            await self.owner._give_back(revoked, commit=True)
        finally:
            await _call_listener(self.user, "on_partitions_revoked", revoked)

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await _call_listener(self.user, "on_partitions_assigned", assigned)

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        try:
            await self.owner._give_back(lost, commit=False)  # someone else owns them
        finally:
            await _call_listener(self.user, "on_partitions_lost", lost)


class ParallelConsumer(Generic[K, V]):
    """Handle a consumer's records concurrently, in order per key (or partition), with
    commits that never pass an unfinished record.

    ``async with ParallelConsumer(consumer, ordering="key", max_concurrency=200) as pc:
    await pc.run(handler)``. The consumer needs a ``group_id`` and
    ``enable_auto_commit=False`` (the ParallelConsumer commits). See the guide
    (docs/guides/parallel.md) for the options and what a crash redelivers.
    """

    def __init__(
        self,
        consumer: Consumer[K, V],
        *,
        ordering: Ordering = "key",
        max_concurrency: int = 100,
        max_queued_per_partition: int | None = None,
        max_queued_total: int | None = None,
        commit_interval_ms: int = 1_000,
        commit_every_records: int | None = None,
        on_failure: OnFailure = "stop",
        retries: int = 0,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
        dead_letter_producer: Producer[Any, Any] | None = None,
        dead_letter_topic: str | None = None,
        revoke_timeout_ms: int | None = 30_000,
        stop_timeout_ms: int | None = 30_000,
        fetch_max_records: int | None = None,
    ) -> None:
        from aiokproto.consumer import Consumer

        if not isinstance(consumer, Consumer):
            raise KafkaConfigError(
                f"ParallelConsumer needs an aiokproto Consumer, not {type(consumer).__name__}"
            )
        group_config = consumer._group_config
        if group_config is None:
            raise KafkaConfigError(
                "ParallelConsumer needs a Consumer with group_id: it commits what finished"
            )
        if group_config.enable_auto_commit:
            raise KafkaConfigError(
                "ParallelConsumer commits only finished records itself: create the Consumer "
                "with enable_auto_commit=False (auto-commit would commit records not yet "
                "handled)"
            )
        if ordering not in ORDERINGS:
            raise KafkaConfigError(
                f"ParallelConsumer: ordering must be one of {ORDERINGS}, not {ordering!r}"
            )
        if on_failure not in ON_FAILURE:
            raise KafkaConfigError(
                f"ParallelConsumer: on_failure must be one of {ON_FAILURE}, not {on_failure!r}"
            )
        _check_int("max_concurrency", max_concurrency, 1)
        _check_int("max_queued_per_partition", max_queued_per_partition, 1, optional=True)
        _check_int("max_queued_total", max_queued_total, 1, optional=True)
        _check_int("commit_interval_ms", commit_interval_ms, 1)
        _check_int("commit_every_records", commit_every_records, 1, optional=True)
        _check_int("retries", retries, 0)
        _check_int("retry_backoff_ms", retry_backoff_ms, 0)
        _check_int("retry_backoff_max_ms", retry_backoff_max_ms, 0)
        _check_int("revoke_timeout_ms", revoke_timeout_ms, 0, optional=True)
        _check_int("stop_timeout_ms", stop_timeout_ms, 0, optional=True)
        _check_int("fetch_max_records", fetch_max_records, 1, optional=True)
        if on_failure == "dead_letter":
            from aiokproto.producer import Producer

            if not isinstance(dead_letter_producer, Producer):
                raise KafkaConfigError(
                    "ParallelConsumer: on_failure='dead_letter' needs dead_letter_producer "
                    "(an aiokproto Producer, started by you)"
                )
        elif dead_letter_producer is not None or dead_letter_topic is not None:
            raise KafkaConfigError(
                "ParallelConsumer: dead_letter_producer/dead_letter_topic are used only with "
                "on_failure='dead_letter'"
            )
        if dead_letter_topic is not None and (
            not isinstance(dead_letter_topic, str) or not dead_letter_topic
        ):
            raise KafkaConfigError(
                f"ParallelConsumer: dead_letter_topic must be a non-empty str, not "
                f"{dead_letter_topic!r}"
            )
        self._consumer = consumer
        self.ordering = ordering
        self.max_concurrency = max_concurrency
        total = max_queued_total or max(1_000, 2 * max_concurrency)
        per_partition = max_queued_per_partition or min(total, max(500, max_concurrency))
        self._sched: Scheduler[ConsumerRecord[K, V]] = Scheduler(
            ordering, max_queued_per_partition=per_partition, max_queued_total=total
        )
        self._commit_interval = commit_interval_ms / 1000
        self._commit_every = commit_every_records
        self._on_failure = on_failure
        self._retries = retries
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self._dlt_producer = dead_letter_producer
        self._dlt_topic = dead_letter_topic
        self._revoke_timeout = None if revoke_timeout_ms is None else revoke_timeout_ms / 1000
        self._stop_timeout = None if stop_timeout_ms is None else stop_timeout_ms / 1000
        self._fetch_max = fetch_max_records or consumer._config.max_poll_records
        # the fetch loop waits while at most _chunk records fit (_refill_below queued
        # or more) and more than _ready_low may start (_full)
        self._chunk = max(1, min(self._fetch_max, total // 2))
        self._refill_below = total - self._chunk
        self._ready_low = max_concurrency // 2
        self._room: asyncio.Future[None] | None = None  # the fetch loop waiting for room
        self._offsets: dict[TopicPartition, PartitionOffsets] = {}
        self._running: dict[asyncio.Task[None], TopicPartition] = {}  # worker -> partition
        self._workers: set[asyncio.Task[None]] = set()
        self._idle: deque[asyncio.Future[None]] = deque()
        self._progress: list[asyncio.Future[None]] = []  # waiting for a record to end
        self._paused: set[TopicPartition] = set()  # paused by us (not by the user)
        self._commit_lock = asyncio.Lock()
        self._handler: Handler[K, V] | None = None
        self._listener: _Chained | None = None
        self._run_task: asyncio.Task[Any] | None = None
        self._done = asyncio.Event()
        self._state = "new"  # new -> entered -> running -> stopped
        self._stop_requested = False
        self._closing = False
        self._fatal: BaseException | None = None
        self._since_commit = 0
        # counters for metrics()
        self.processed = 0
        self.retried = 0
        self.skipped = 0
        self.dead_lettered = 0
        self.in_flight_max = 0
        # registered on entering (one ParallelConsumer per consumer at a time), the
        # per-partition family removed on leaving
        self._family: Callable[[float], dict[Any, float]] | None = None

    def __repr__(self) -> str:
        return (
            f"<ParallelConsumer {self._state} ordering={self.ordering!r} "
            f"max_concurrency={self.max_concurrency} in_flight={self.in_flight} "
            f"queued={self.queued}>"
        )

    @property
    def in_flight(self) -> int:
        """Handlers running now."""
        return len(self._running)

    @property
    def queued(self) -> int:
        """Records fetched and not yet started."""
        return self._sched.queued_total

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> ParallelConsumer[K, V]:
        if self._state != "new":
            raise IllegalStateError(f"this ParallelConsumer was already used ({self._state})")
        if self._consumer in _IN_USE:
            raise IllegalStateError(
                "this consumer already has a ParallelConsumer (one at a time: two would "
                "share its records and each commit past records the other has not finished)"
            )
        _IN_USE.add(self._consumer)
        self._register_metrics()
        self._state = "entered"
        self._install_listener()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.stop()
        finally:
            self._state = "stopped"
            _IN_USE.discard(self._consumer)
            families = self._consumer._registry._families
            if self._family in families:
                families.remove(self._family)  # (its gauges stay readable)
            subs = self._consumer._subs
            if subs.listener_hook == self._chain:
                subs.listener_hook = None
            listener = self._listener
            if listener is not None and subs.listener is listener:
                subs._listener = listener.user  # the consumer's listener as it was

    def _install_listener(self) -> None:
        """Chain our listener in front of the consumer's (again if the user replaced it
        with ``subscribe(listener=...)``)."""
        subs = self._consumer._subs
        # a subscribe() from now on chains ours at once (before the revoke it starts)
        subs.listener_hook = self._chain
        current = subs.listener
        if current is not None and current is self._listener:
            return
        if subs.kind == "assigned":
            return  # a manual assignment has no rebalances
        subs._listener = self._chain(current)

    def _chain(self, user: ConsumerRebalanceListener | None) -> ConsumerRebalanceListener:
        self._listener = _Chained(self, user)
        return self._listener

    async def stop(self) -> None:
        """Stop ``run()``: no record starts any more, in-flight ones get
        ``stop_timeout_ms`` to finish (then are cancelled), the safe offsets are
        committed, and ``run()`` returns. From a handler it returns at once (``run()``
        waits for that handler to end)."""
        self._stop_requested = True
        if self._room is not None:
            _wake(self._room)  # the fetch loop waiting for room notices at once
        task = self._run_task
        if task is None:
            return
        current = asyncio.current_task()
        if current is task or current in self._workers:
            return  # waiting here would wait for itself
        await self._done.wait()

    async def run(self, handler: Handler[K, V]) -> None:
        """Handle records with ``handler`` until ``stop()``, a fatal error (raised
        here) or the consumer stops. Cancelling it stops cleanly (handlers cancelled,
        safe offsets committed)."""
        if not callable(handler):
            raise KafkaConfigError(
                f"ParallelConsumer.run: handler must be callable, not {handler!r}"
            )
        if self._state != "entered":
            if self._state == "new":
                raise IllegalStateError(
                    "use 'async with ParallelConsumer(...) as pc: await pc.run(...)'"
                )
            raise IllegalStateError(f"ParallelConsumer.run: it is {self._state}")
        self._state = "running"
        self._handler = handler
        self._run_task = asyncio.current_task()
        self._done.clear()
        cancelled = False
        try:
            await self._fetch_loop()
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            try:
                await self._shutdown(cancelled=cancelled)
            finally:
                self._state = "stopped"
                self._done.set()
        fatal = self._fatal
        if fatal is not None:
            raise fatal

    # -- the fetch loop ------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        consumer = self._consumer
        sched = self._sched
        loop = asyncio.get_running_loop()
        next_commit = loop.time() + self._commit_interval
        while not self._stop_requested and self._fatal is None:
            self._install_listener()
            if self._full():
                await self._wait_for_room(loop)
                if self._stop_requested or self._fatal is not None:
                    break
            room = sched.max_queued_total - sched.queued_total
            try:
                batch = await consumer.getmany(
                    timeout_ms=_POLL_MS, max_records=max(1, min(self._fetch_max, room - 1))
                )
            except ConsumerStoppedError:
                return  # the consumer stopped under us: its revoke committed
            except KafkaError as exc:
                if not exc.retriable:
                    raise  # run() ends (its shutdown commits what finished)
                log.warning("ParallelConsumer: getmany raised %r; polling again", exc)
                await asyncio.sleep(_POLL_MS / 1000)
                continue
            if batch:
                self._take(batch)
            now = loop.time()
            if now >= next_commit or (
                self._commit_every is not None and self._since_commit >= self._commit_every
            ):
                next_commit = now + self._commit_interval
                if self._paused:  # every one (the fair share moves with the assignment)
                    self._maybe_resume()
                await self._commit()

    def _full(self) -> bool:
        """Enough is queued that fetching now would add only a few records: the next
        fetch waits until more than a chunk fits (``fetch_max_records``, at most half
        the total bound), or until few records are ready to start (the queues hold
        records of busy keys: fetch for other keys, as the bounds allow). (More than a
        chunk, and a fetch one short of the total bound: a chunk then leaves the total
        under its bound, which would pause every partition holding its fair share.)"""
        sched = self._sched
        return sched.queued_total >= self._refill_below and sched.ready_count > self._ready_low

    async def _wait_for_room(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait until ``_full()`` no longer holds (a worker taking a record checks), or
        ``_POLL_MS`` (the consumer is polled that often at least: its housekeeping, a
        rebalance's callbacks), a stop or a fatal error. Without it, the fetch loop took
        a record or two per pass as workers freed room, paying the per-batch costs
        (the fetch, the bounds check of every partition) for each."""
        waiter: asyncio.Future[None] = loop.create_future()
        self._room = waiter
        handle = loop.call_later(_POLL_MS / 1000, _wake, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._room = None

    def _take(self, batch: dict[TopicPartition, list[ConsumerRecord[K, V]]]) -> None:
        """Track and queue a fetched batch; pause partitions past their bounds."""
        sched = self._sched
        now = time.monotonic()
        by_key = self.ordering == "key"
        for tp, records in batch.items():
            po = self._offsets.get(tp)
            if po is None:
                po = self._offsets[tp] = PartitionOffsets()
            elif records and records[0].offset < po.next_offset:
                self._rewind(tp, po, records[0].offset)
            po.add_many([r.offset for r in records], now)
            sched.add_many(tp, records, map(_key_of, records) if by_key else ())
        assigned = self._consumer.assignment()
        sched.partitions = len(assigned)
        paused_now: frozenset[TopicPartition] | None = None
        for tp in batch if sched.queued_total < sched.max_queued_total else assigned:
            if sched.over_limit(tp):
                if tp in self._paused:
                    if paused_now is None:
                        paused_now = self._consumer.paused()
                    if tp in paused_now:
                        continue
                    self._paused.discard(tp)  # the user resumed it: pause it again
                self._pause(tp)
        self._dispatch()

    def _rewind(self, tp: TopicPartition, po: PartitionOffsets, offset: int) -> None:
        """The consumer's position of ``tp`` moved back to ``offset`` (the user's
        ``seek()``, an offset reset): its queued records from there on are dropped
        (fetched again), those below stay queued, and the tracking forgets the records
        from there on (those in flight still hold the commit until they end)."""
        sched = self._sched
        dropped = sched.drop({tp})
        keep = sorted((r for r in dropped if r.offset < offset), key=lambda r: r.offset)
        po.rewind(offset, {r.offset for r in dropped if r.offset >= offset})
        sched.add_many(tp, keep, map(_key_of, keep))
        if self._paused:  # (the total came down too: not only tp may resume)
            self._maybe_resume()
        log.info("ParallelConsumer: %s moved back to offset %d: taken again from there", tp, offset)

    def _pause(self, tp: TopicPartition) -> None:
        if tp in self._consumer.paused():
            return  # the user's pause: not ours to resume
        with contextlib.suppress(IllegalStateError):  # (not assigned any more)
            self._consumer.pause(tp)
            self._paused.add(tp)

    def _maybe_resume(self, taken: TopicPartition | None = None) -> None:
        """Resume the partitions we paused whose queues drained. Queues shrink only as
        records are taken, so a worker checks ``taken`` alone (a record of it was just
        taken and at most half its bound is left), and every one when the total comes
        down to half its bound (takes lower it one at a time: it passes there; the
        partitions still paused then hold over half their own bound each, so they are
        few); without ``taken`` (then, at each commit, after a revoke or a rewind: a
        drop lowers the total at once), every one."""
        sched = self._sched
        if taken is not None:
            if taken not in self._paused or not sched.under_limit(taken):
                return
            ready = [taken]
        else:
            ready = [tp for tp in self._paused if sched.under_limit(tp)]
        if ready:
            self._paused.difference_update(ready)
            assigned = self._consumer.assignment()
            with contextlib.suppress(IllegalStateError):
                self._consumer.resume(*(tp for tp in ready if tp in assigned))

    def _dispatch(self) -> None:
        """Wake idle workers for the records that may start, and start workers up to
        ``max_concurrency`` if there are not enough."""
        n = self._sched.ready_count
        idle = self._idle
        while n and idle:
            fut = idle.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1
        spawn = min(n, self.max_concurrency - len(self._workers))
        if spawn > 0:
            loop = asyncio.get_running_loop()
            for _ in range(spawn):
                task = loop.create_task(self._work(), name="aiokproto-parallel-worker")
                self._workers.add(task)
                task.add_done_callback(self._workers.discard)

    # -- workers ------------------------------------------------------------------------

    async def _work(self) -> None:
        # The per-record path: each line here runs for every record (see
        # benchmarks/parallel_bench.py for its CPU cost), so it is kept flat, calling
        # the handler itself, with the retries and failure policy out of line.
        task = asyncio.current_task()
        assert task is not None
        sched = self._sched
        take = sched.take
        ready = sched.ready
        refill_below, ready_low = self._refill_below, self._ready_low
        half_total = sched.max_queued_total // 2
        half_partition = sched.max_queued_per_partition // 2
        paused = self._paused
        offsets = self._offsets
        running = self._running
        handler = self._handler
        assert handler is not None
        loop = asyncio.get_running_loop()
        # (a stop() ends the loop too: the fetch loop's shutdown may run only later, and
        # a worker whose handler called stop() would take the next record at once)
        while not self._closing and not self._stop_requested and self._fatal is None:
            got = take()
            if got is None:
                fut: asyncio.Future[None] = loop.create_future()
                self._idle.append(fut)
                await fut
                continue
            tp, lane, record = got
            room = self._room
            if room is not None and (sched.queued_total < refill_below or len(ready) <= ready_low):
                _wake(room)  # (not _full() any more)
            if paused:
                if sched.queued_total == half_total:
                    self._maybe_resume()  # the total just came down to half: any may resume
                elif sched.left_in_partition <= half_partition and tp in paused:
                    self._maybe_resume(tp)  # (more left: it may not resume yet)
            po = offsets[tp]
            running[task] = tp
            if len(running) > self.in_flight_max:
                self.in_flight_max = len(running)
            finished = False
            try:
                result: object = _NOT_CALLED
                failure: BaseException | None = None
                try:
                    result = handler(record)
                    await result  # (not awaitable: a TypeError, _retry says so)
                except BaseException as exc:
                    failure = exc  # (handled below, outside this except: no chaining)
                if failure is not None:
                    finished = await self._retry(task, record, result, failure)
                    failure = None
                elif task.cancelling():
                    # the handler swallowed our cancellation: interrupted, so not done
                    # (and the worker ends, as the revoke or stop waiting for it expects)
                    raise asyncio.CancelledError
                else:
                    self.processed += 1
                    finished = True
            finally:
                del running[task]
                if finished:
                    po.finish(record.offset)
                    self._since_commit += 1
                if self._fatal is None:
                    sched.release(lane)  # (after a fatal error, its key stays held)
                if self._progress:  # a revoke or a stop waits for records to end
                    progress, self._progress = self._progress, []
                    for waiter in progress:
                        if not waiter.done():
                            waiter.set_result(None)

    async def _retry(
        self,
        task: asyncio.Task[None],
        record: ConsumerRecord[K, V],
        result: object,
        exc: BaseException,
    ) -> bool:
        """The handler raised ``exc`` on ``record`` (``result``: what it returned,
        ``_NOT_CALLED`` if the call itself raised): retries, then the failure policy;
        True if the record is done (handled, skipped, dead-lettered)."""
        handler = self._handler
        assert handler is not None
        attempt = 1
        while True:
            if result is not _NOT_CALLED and not inspect.isawaitable(result):
                # a plain function: its body ran, so a retry would run it again
                self._set_fatal(
                    KafkaConfigError(
                        f"ParallelConsumer: the handler must return an awaitable (an "
                        f"async def function), not {type(result).__name__}: {handler!r}"
                    )
                )
                return False
            if not isinstance(exc, Exception | asyncio.CancelledError):
                self._set_fatal(exc)  # KeyboardInterrupt, SystemExit...
                return False
            if task.cancelling():
                # we were cancelled (revoke timeout, stop, run() cancelled), also if the
                # handler turned it into an error of its own: not done, no retry
                if isinstance(exc, asyncio.CancelledError):
                    raise exc
                raise asyncio.CancelledError from exc
            if attempt > self._retries:
                return await self._failed(record, exc, attempt)
            self.retried += 1
            await asyncio.sleep(backoff_s(attempt, *self._backoff))
            attempt += 1
            result = _NOT_CALLED
            try:
                result = handler(record)
                await result
            except BaseException as again:
                exc = again
                continue
            if task.cancelling():
                raise asyncio.CancelledError  # (as in _work: interrupted, not done)
            self.processed += 1
            return True

    async def _failed(
        self, record: ConsumerRecord[K, V], exc: BaseException, attempts: int
    ) -> bool:
        where = f"{record.topic}-{record.partition} offset {record.offset}"
        if self._on_failure == "skip":
            log.warning("ParallelConsumer: skipping %s after %d attempts: %r", where, attempts, exc)
            self.skipped += 1
            return True
        if self._on_failure == "dead_letter":
            producer = self._dlt_producer
            assert producer is not None
            topic = self._dlt_topic or f"{record.topic}.DLT"
            headers = dead_letter_headers(record, exc, attempts)  # type: ignore[arg-type]
            try:
                delivery = await producer.send(
                    topic, value=record.value, key=record.key, headers=headers
                )
                await delivery
            except Exception as send_error:
                send_error.add_note(f"ParallelConsumer: dead-lettering {where} to {topic!r} failed")
                self._set_fatal(send_error)
                return False
            self.dead_lettered += 1
            return True
        exc.add_note(
            f"ParallelConsumer: the handler failed on {where} after {attempts} attempt(s); "
            "on_failure='stop': nothing from that offset on is committed for the partition"
        )
        self._set_fatal(exc)
        return False

    def _set_fatal(self, exc: BaseException) -> None:
        if self._fatal is None:
            self._fatal = exc
        if self._room is not None:
            _wake(self._room)

    # -- commits and rebalances ----------------------------------------------------------

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        """Commit every partition's safe offset that moved (of ``only`` if given)."""
        async with self._commit_lock:
            offsets: dict[TopicPartition, int] = {}
            for tp, po in self._offsets.items():
                if only is None or tp in only:
                    offset = po.to_commit()
                    if offset is not None:
                        offsets[tp] = offset
            self._since_commit = 0
            if not offsets:
                return
            try:
                await self._consumer.commit(
                    {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}
                )
            except ConsumerStoppedError:
                return
            except KafkaError as exc:  # retried on the next commit
                log.warning("ParallelConsumer: commit of %s failed: %r", offsets, exc)
                return
            for tp, offset in offsets.items():
                tracked = self._offsets.get(tp)
                if tracked is not None and offset > tracked.committed:
                    tracked.committed = offset

    async def _wait_ended(
        self, partitions: set[TopicPartition] | None, limit_s: float | None
    ) -> bool:
        """Wait for in-flight records (of ``partitions``) to end; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = None if limit_s is None else loop.time() + limit_s

        def busy() -> bool:
            if partitions is None:
                return bool(self._running)
            return any(tp in partitions for tp in self._running.values())

        while busy():
            waiter: asyncio.Future[None] = loop.create_future()
            self._progress.append(waiter)
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, remaining)
        return True

    async def _cancel_running(self, partitions: set[TopicPartition] | None) -> None:
        tasks = [t for t, tp in self._running.items() if partitions is None or tp in partitions]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _give_back(self, partitions: frozenset[TopicPartition], *, commit: bool) -> None:
        """The group takes ``partitions`` (from the rebalance listener): their queued
        records never start, in-flight ones end (or are cancelled), the safe offsets
        are committed (revoked, not lost) and the consumer's position moved there, so
        a commit without offsets from the user's listener commits it too."""
        tps = set(partitions)
        self._sched.drop(tps)
        if not await self._wait_ended(tps, self._revoke_timeout):
            log.warning(
                "ParallelConsumer: handlers of %s still running after revoke_timeout_ms: cancelled",
                sorted(tps),
            )
            await self._cancel_running(tps)
        if commit:
            await self._commit(tps)
            for tp in tps:
                po = self._offsets.get(tp)
                safe = None if po is None else po.safe
                if safe is not None:
                    with contextlib.suppress(KafkaError):
                        self._consumer.seek(tp, safe)
        for tp in tps:
            self._offsets.pop(tp, None)
            self._paused.discard(tp)
        if self._paused:
            # the drop lowered the total at once, past half its bound perhaps (the
            # workers check it only as their takes lower it): any may resume
            self._maybe_resume()
        self._dispatch()

    async def _shutdown(self, *, cancelled: bool) -> None:
        """End every worker (in-flight records get ``stop_timeout_ms`` unless run()
        was cancelled), commit the safe offsets, resume what we paused."""
        self._closing = True
        self._sched.drop(set(self._offsets))
        idle, self._idle = self._idle, deque()
        for fut in idle:
            if not fut.done():
                fut.set_result(None)
        if not cancelled and not await self._wait_ended(None, self._stop_timeout):
            log.warning("ParallelConsumer: handlers still running after stop_timeout_ms: cancelled")
        await self._cancel_running(None)
        workers = list(self._workers)
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
        await self._commit()
        # The consumer is left where the work stopped: each partition's position at its
        # safe offset (records dropped from the queues are fetched again if it goes on
        # being used, and a commit of positions commits only what finished).
        consumer = self._consumer
        with contextlib.suppress(KafkaError):
            assigned = consumer.assignment()
            for tp, po in self._offsets.items():
                safe = po.safe
                if safe is not None and tp in assigned:
                    consumer.seek(tp, safe)
            paused = set(self._paused)
            self._paused.clear()  # (the same set: workers keep it)
            consumer.resume(*(tp for tp in paused if tp in assigned))

    # -- metrics -------------------------------------------------------------------------

    def _register_metrics(self) -> None:
        registry = self._consumer._registry
        group = METRICS_GROUP
        registry.gauge("in-flight", group, lambda: len(self._running), "handlers running now")
        registry.gauge("queued", group, lambda: self._sched.queued_total, "fetched, not started")
        registry.gauge("processed-total", group, lambda: self.processed, "records handled")
        registry.gauge("retries-total", group, lambda: self.retried, "handler retries")
        registry.gauge("skipped-total", group, lambda: self.skipped, "records skipped on failure")
        registry.gauge(
            "dead-lettered-total", group, lambda: self.dead_lettered, "records dead-lettered"
        )

        def per_partition(now: float) -> dict[Any, float]:
            if self._state == "stopped":
                return {}
            mono = time.monotonic()
            return {
                registry.name(
                    "oldest-unfinished-age-ms",
                    group,
                    "how long the lowest unfinished record has waited",
                    topic=tp.topic,
                    partition=str(tp.partition),
                ): po.oldest_age(mono) * 1000
                for tp, po in list(self._offsets.items())
            }

        registry.family(per_partition)
        self._family = per_partition
