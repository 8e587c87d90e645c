"""What ``send()`` hands back: a light per-record handle over its batch's one future
(``DeliveryFuture``, an asyncio future to ``gather``/``wait``), ``BatchDelivery``,
``wait_delivered``, ``OnDelivery``.

There is one ``asyncio.Future`` per batch, resolved with the broker's answer for the
whole batch; a record's ``RecordMetadata`` is computed only when someone asks for it,
from the batch's base offset plus the record's offset delta.
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_right
from collections.abc import Callable, Generator, Iterable, Sequence
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from aiokproto.accel import native as _native
from aiokproto.errors import KafkaError
from aiokproto.structs import RecordMetadata as RecordMetadata  # its home before issue 32

if TYPE_CHECKING:
    from aiokproto.producer.batch import BatchResult, ProducerBatch, Split
    from aiokproto.records.record import Header

log = logging.getLogger(__name__)

CREATE_TIME = 0
LOG_APPEND_TIME = 1


def record_metadata(
    batch: ProducerBatch, result: BatchResult, delta: int, timestamp: int, ksize: int, vsize: int
) -> RecordMetadata:
    base, append_time, log_start = result
    if append_time >= 0:
        return RecordMetadata(
            batch.topic,
            batch.partition,
            base + delta if base >= 0 else -1,
            append_time,
            ksize,
            vsize,
            LOG_APPEND_TIME,
            log_start,
        )
    return RecordMetadata(
        batch.topic,
        batch.partition,
        base + delta if base >= 0 else -1,
        timestamp,
        ksize,
        vsize,
        CREATE_TIME,
        log_start,
    )


def settled(batch: ProducerBatch, delta: int) -> tuple[asyncio.Future[BatchResult], int]:
    """The future holding record ``delta``'s outcome, and its offset delta there: the
    batch's own, or once the batch was split (refused as too large), the piece's that
    holds it. Until the split batch is resolved, its own (not done yet)."""
    batch, delta = settled_at(batch, delta)
    return batch.future, delta


def settled_at(batch: ProducerBatch, delta: int) -> tuple[ProducerBatch, int]:
    """``settled``'s batch (whose topic and partition the record has: a record sent
    before its topic's metadata was known is placed on a partition later).

    A placement (``Split.at``) is followed at once: the record's fate is its place's,
    whatever became of the topic's other records. Pieces of a refused batch only once
    the batch is resolved (until then its own future is the record's)."""
    split: Split | None = batch.split
    while split is not None:
        if split.at is not None:
            batch, delta = split.at[delta]
        elif batch.future.done():
            i = bisect_right(split.firsts, delta) - 1
            delta -= split.firsts[i]
            batch = split.pieces[i]
        else:
            break
        split = batch.split
    return batch, delta


def record_done(batch: ProducerBatch, delta: int) -> bool:
    """Whether record ``delta`` of ``batch`` has its fate (not counting cancel())."""
    if batch.future.done():
        return True
    split = batch.split
    return split is not None and split.at is not None and settled_at(batch, delta)[0].future.done()


if TYPE_CHECKING or _native is None:

    class _HandleFields:
        """A handle's fields: compiled, the C type ``aiokproto._accel.DeliveryHandle``
        (one allocation per ``send()`` instead of a Python ``__init__``)."""

        __slots__ = ("_batch", "_delta", "_error", "_ksize", "_timestamp", "_vsize")

        def __init__(
            self,
            batch: ProducerBatch | None,
            delta: int,
            timestamp: int,
            ksize: int,
            vsize: int,
            error: KafkaError | None = None,
        ) -> None:
            self._batch = batch
            self._delta = delta
            self._timestamp = timestamp
            self._ksize = ksize
            self._vsize = vsize
            self._error = error

else:
    _HandleFields = _native.DeliveryHandle


class DeliveryFuture(_HandleFields):
    """Awaitable delivery result of one record: ``meta = await handle``.

    Raises the delivery error instead (``RecordTooLargeError``, ``KafkaTimeoutError``
    after ``delivery_timeout_ms``, a broker error...). ``done()``/``result()`` inspect
    it without waiting.

    It is also a future to asyncio (``asyncio.isfuture(handle)``): ``asyncio.gather``,
    ``wait``, ``wait_for`` and ``shield`` take handles as they are, without a Task per
    handle. ``cancel()`` cancels the handle, not the record: see there.
    """

    __slots__ = ()

    #: asyncio's mark of a future-like object (``asyncio.isfuture``); False because
    #: ``__await__`` never yields the handle itself
    _asyncio_future_blocking = False

    @classmethod
    def failed(cls, error: KafkaError) -> DeliveryFuture:
        return cls(None, 0, -1, -1, -1, error)

    @property
    def batch(self) -> ProducerBatch | None:
        """The batch the record is in (None for a record refused before buffering)."""
        return self._batch

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if batch is None:
            assert self._error is not None
            raise self._error
        if not self.done():
            # A waiter of its own, woken by the delivery or by cancel(): cancelling the
            # awaiting task cancels only the waiter, neither the handle nor the batch.
            waiter: asyncio.Future[None] = batch.future.get_loop().create_future()
            self.add_done_callback(partial(_wake, waiter))
            yield from waiter.__await__()
        return self.result()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        batch = self._batch
        return asyncio.get_running_loop() if batch is None else batch.future.get_loop()

    def done(self) -> bool:
        batch = self._batch
        if batch is None or batch.future.done():
            return True
        state = batch.handles
        if state is not None and self._delta in state.cancelled:
            return True
        return batch.split is not None and record_done(batch, self._delta)

    def cancelled(self) -> bool:
        batch = self._batch
        state = None if batch is None else batch.handles
        return state is not None and self._delta in state.cancelled

    def cancel(self, msg: Any | None = None) -> bool:
        """Stop waiting for this record: the handle (and every handle of the same
        record) is done and cancelled, its callbacks run soon, and awaiting it raises
        ``CancelledError``. The record itself stays buffered and is still delivered,
        and no other record is affected (records are dropped with ``purge()``).
        False if the record's fate is already known."""
        batch = self._batch
        delta = self._delta
        if batch is None or record_done(batch, delta):
            return False
        state = _handle_state(batch)
        if delta in state.cancelled:
            return False
        state.cancelled[delta] = msg
        calls = state.calls
        positions = state.index.pop(delta, None)
        if calls is not None and positions:
            loop = batch.future.get_loop()
            for i in positions:
                callback = calls[i]
                if callback.__class__ is OnDelivery:
                    continue  # reports the delivery itself, which still happens
                calls[i] = _noop
                loop.call_soon(callback, self)
        return True

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        # asyncio.gather calls this on a cancelled child
        msg = self._cancel_message
        return asyncio.CancelledError() if msg is None else asyncio.CancelledError(msg)

    @property
    def _cancel_message(self) -> Any:
        batch = self._batch
        state = None if batch is None else batch.handles
        return None if state is None else state.cancelled.get(self._delta)

    def result(self) -> RecordMetadata:
        """The metadata now; ``asyncio.InvalidStateError`` if not delivered yet."""
        batch = self._batch
        if batch is None:
            assert self._error is not None
            raise self._error
        if batch.handles is not None and self._delta in batch.handles.cancelled:
            raise self._make_cancelled_error()
        if batch.split is not None:
            batch, delta = settled_at(batch, self._delta)
            return record_metadata(
                batch, batch.future.result(), delta, self._timestamp, self._ksize, self._vsize
            )
        return record_metadata(
            batch, batch.future.result(), self._delta, self._timestamp, self._ksize, self._vsize
        )

    def exception(self) -> BaseException | None:
        batch = self._batch
        if batch is None:
            return self._error
        if batch.handles is not None and self._delta in batch.handles.cancelled:
            raise self._make_cancelled_error()
        if batch.split is not None:
            return settled(batch, self._delta)[0].exception()
        return batch.future.exception()

    def add_done_callback(self, callback: Callable[[DeliveryFuture], object]) -> None:
        """Call ``callback(handle)`` on the event loop once the record's fate is known
        (delivery reports without a task per record). The handle passed is equal to
        this one (same record), not always the same object."""
        batch = self._batch
        calls = None if batch is None else batch.callbacks
        if calls is not None:  # the batch's record callbacks have not run yet
            calls += (callback, self._delta, self._timestamp, self._ksize, self._vsize)
            return
        self._add_callback_slow(callback)

    def _add_callback_slow(self, callback: Callable[[DeliveryFuture], object]) -> None:
        # the batch has no run list: it is done (or the record was refused), or this is
        # its first callback, or a handle of it was cancelled or had a callback removed
        batch = self._batch
        if batch is None or record_done(batch, self._delta):
            asyncio.get_running_loop().call_soon(callback, self)
            return
        state = batch.handles
        if state is None:
            calls: list[Any] = []
            batch.callbacks = calls
            batch.future.add_done_callback(_run_record_callbacks(batch, calls))
            # Flat runs of (callback, delta, timestamp, ksize, vsize): nothing made per
            # record outlives this call (a handle kept per record until delivery made
            # the cyclic GC walk hundreds of thousands of live objects: 3x the cost of
            # the send loop).
            calls += (callback, self._delta, self._timestamp, self._ksize, self._vsize)
            return
        if self._delta in state.cancelled and callback.__class__ is not OnDelivery:
            batch.future.get_loop().call_soon(callback, self)
            return
        run = state.calls
        if run is None:
            run = state.calls = []
            batch.future.add_done_callback(_run_record_callbacks(batch, run))
        state.index.setdefault(self._delta, []).append(len(run))
        if state.placed is not None:  # placed records: run when the record's place is
            _run_when_placed(batch, state, run, self._delta, len(run))
        run += (callback, self._delta, self._timestamp, self._ksize, self._vsize)

    def remove_done_callback(self, callback: Callable[[DeliveryFuture], object]) -> int:
        """Remove ``callback`` from this record's callbacks; returns how many were
        removed (0 once the record's fate is known: they are already scheduled)."""
        batch = self._batch
        if batch is None or record_done(batch, self._delta):
            return 0
        state = _handle_state(batch)
        positions = state.index.get(self._delta)
        calls = state.calls
        if not positions or calls is None:
            return 0
        kept = []
        for i in positions:
            if calls[i] == callback:
                calls[i] = _noop
            else:
                kept.append(i)
        state.index[self._delta] = kept
        return len(positions) - len(kept)

    def __reduce__(self) -> tuple[Any, ...]:
        # compiled, the fields are C members object's default copy/pickle cannot read
        return (
            self.__class__,
            (self._batch, self._delta, self._timestamp, self._ksize, self._vsize, self._error),
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not DeliveryFuture:
            return NotImplemented
        assert isinstance(other, DeliveryFuture)
        if self._batch is None:
            return self is other
        return self._batch is other._batch and self._delta == other._delta

    def __hash__(self) -> int:
        return id(self) if self._batch is None else hash((id(self._batch), self._delta))

    def __repr__(self) -> str:
        if self._batch is None:
            return f"<DeliveryFuture failed: {self._error!r}>"
        state = "cancelled" if self.cancelled() else "done" if self.done() else "pending"
        batch = settled_at(self._batch, self._delta)[0]  # its partition, once placed
        return f"<DeliveryFuture {batch.topic}[{batch.partition}] {state}>"


class HandleState:
    """A batch's per-record handle state, made at the first ``cancel()`` or
    ``remove_done_callback()`` on a handle of it (most batches never have one).

    From then on the batch's callback runs live here, indexed by record, and
    ``batch.callbacks`` stays None, so that every later ``add_done_callback`` of the
    batch takes the Python path that keeps the index (and sees cancelled records).
    """

    __slots__ = ("calls", "cancelled", "index", "placed")

    def __init__(self, calls: list[Any] | None) -> None:
        self.calls = calls
        self.cancelled: dict[int, Any] = {}  # record's offset delta -> cancel message
        self.index: dict[int, list[int]] = {}  # offset delta -> its runs in calls
        # once the records are placed (``follow_places``): id of a place batch -> the
        # runs in calls to make when it resolves
        self.placed: dict[int, list[int]] | None = None
        if calls is not None:
            for i in range(0, len(calls), 5):
                self.index.setdefault(calls[i + 1], []).append(i)


def _handle_state(batch: ProducerBatch) -> HandleState:
    state = batch.handles
    if state is None:
        state = batch.handles = HandleState(batch.callbacks)
        batch.callbacks = None
    return state


def follow_places(parent: ProducerBatch) -> None:
    """``parent``'s records were just placed on real batches (``parent.split.at``, a
    ``pending.PendingTopic``): each record's callbacks (so its awaiting task) run when
    its own place resolves, not once every place has (a record alone in a full batch
    waited for a lingering one on another partition, or for a leader that was down)."""
    state = _handle_state(parent)  # later add_done_callback calls take the Python path
    state.placed = {}
    waiting = state.calls
    run: list[Any] = [] if waiting is None else waiting.copy()
    if waiting is not None:
        waiting.clear()  # the parent's own run (if any) has nothing left to do
    state.calls = run
    for i in range(0, len(run), 5):
        _run_when_placed(parent, state, run, run[i + 1], i)


def _run_when_placed(
    parent: ProducerBatch, state: HandleState, run: list[Any], delta: int, i: int
) -> None:
    """Make ``run[i:i+5]`` (record ``delta``'s) when the record's place resolves."""
    assert state.placed is not None
    place = settled_at(parent, delta)[0]
    positions = state.placed.get(id(place))
    if positions is None:
        positions = state.placed[id(place)] = []
        callback = partial(_run_placed, parent, state, run, id(place))
        if place.future.done():  # a record that could not be placed: failed already
            place.future.get_loop().call_soon(callback, place.future)
        else:
            place.future.add_done_callback(callback)
    positions.append(i)


def _run_placed(
    parent: ProducerBatch,
    state: HandleState,
    run: list[Any],
    key: int,
    _future: asyncio.Future[BatchResult],
) -> None:
    assert state.placed is not None
    for i in state.placed.pop(key):
        callback = run[i]
        run[i] = _noop  # made once (cancel() and remove_done_callback() see it gone)
        _call(callback, DeliveryFuture(parent, run[i + 1], run[i + 2], run[i + 3], run[i + 4]))


def _call(callback: Callable[[DeliveryFuture], object], handle: DeliveryFuture) -> None:
    """One record callback of a run (the Python loops; the C one does the same)."""
    try:
        callback(handle)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # one user's callback must not starve the others
        _report(exc)


def _noop(_handle: DeliveryFuture) -> None:
    """What a cancelled or removed callback's place in a run list calls."""


def _wake(waiter: asyncio.Future[None], _handle: DeliveryFuture) -> None:
    if not waiter.done():
        waiter.set_result(None)


class OnDelivery:
    """``send(..., on_delivery=callback)``: ``callback(error, metadata)`` once the
    record's fate is known, on the event loop: ``(None, RecordMetadata)`` when it was
    written, ``(KafkaError, None)`` when it was not. Not stopped by ``cancel()`` of the
    record's handle (it reports the delivery, which cancelling does not stop). An
    exception it raises is logged (logger ``aiokproto.producer.delivery``), never
    propagated: the producer and the other callbacks go on."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[KafkaError | None, RecordMetadata | None], object]):
        self.callback = callback

    def __call__(self, handle: DeliveryFuture) -> None:
        try:
            batch = handle._batch
            if batch is None:
                self.callback(handle._error, None)
                return
            batch, delta = settled_at(batch, handle._delta)
            future = batch.future
            error = future.exception()
            if error is not None:
                if not isinstance(error, KafkaError):  # batches fail with KafkaErrors
                    cause, error = error, KafkaError(f"the record was not delivered: {error!r}")
                    error.__cause__ = cause
                self.callback(error, None)
                return
            meta = record_metadata(
                batch,
                future.result(),
                delta,
                handle._timestamp,
                handle._ksize,
                handle._vsize,
            )
            self.callback(None, meta)
        except Exception:
            log.exception("on_delivery callback %r raised", self.callback)


if _native is not None:
    # The compiled base has the per-record calls (the same behaviour, one C call each):
    # DeliveryFuture's Python versions above are the reference the tests compare.
    # done() and exception() stay in Python: they see cancelled records
    delattr(DeliveryFuture, "add_done_callback")


def _append_to(
    cls: type[DeliveryFuture],
    batch: ProducerBatch,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] | None,
    ksize: int,
    vsize: int,
) -> DeliveryFuture | None:
    delta = batch.builder.append(timestamp, key, value, headers)
    return None if delta is None else cls(batch, delta, timestamp, ksize, vsize)


#: ``append_to(DeliveryFuture, batch, timestamp, key, value, headers, ksize, vsize)``:
#: the record onto ``batch.builder`` and its handle, or None if the batch is full (one
#: C call when compiled)
append_to: Callable[
    [
        type[DeliveryFuture],
        ProducerBatch,
        int,
        bytes | None,
        bytes | None,
        Sequence[Header] | None,
        int,
        int,
    ],
    DeliveryFuture | None,
] = _append_to if _native is None else _native.append_to


def _report(error: BaseException) -> None:
    """What is done with an exception a record callback raised, at once, before the
    next callback runs: an ``Exception`` is logged; another ``BaseException`` (but
    ``SystemExit`` and ``KeyboardInterrupt``, which end the run) goes to the loop's
    exception handler, as asyncio does with a callback's (a ``CancelledError`` from
    ``result()`` of a cancelled handle stopped the batch's other callbacks, and with them
    the wake-up of every task awaiting one of its records)."""
    if isinstance(error, Exception):
        log.error("a delivery callback raised", exc_info=error)
        return
    asyncio.get_running_loop().call_exception_handler(
        {"message": "a delivery callback raised", "exception": error}
    )


def _run_record_callbacks(
    batch: ProducerBatch, calls: list[Any]
) -> Callable[[asyncio.Future[BatchResult]], None]:
    def run(_future: asyncio.Future[BatchResult]) -> None:
        # from here on add_done_callback finds the future done and schedules its own
        batch.callbacks = None
        if batch.handles is not None:
            batch.handles.calls = None
        if _native is not None:
            _native.run_record_callbacks(DeliveryFuture, batch, calls, _report)
            return
        for i in range(0, len(calls), 5):
            handle = DeliveryFuture(batch, calls[i + 1], calls[i + 2], calls[i + 3], calls[i + 4])
            _call(calls[i], handle)

    return run


class Segment(NamedTuple):
    """Records ``start..start+length`` of a ``send_batch`` call went to ``batch`` from
    offset delta ``first_delta`` on."""

    batch: ProducerBatch
    start: int
    first_delta: int
    length: int


class BatchDelivery:
    """Awaitable result of ``send_batch``: one ``RecordMetadata`` per record, in order.

    Raises the first delivery error if any part failed (records of one call can span
    several batches; those of other batches may still have been delivered).
    """

    __slots__ = ("_keys", "_segments", "_timestamp", "_values")

    def __init__(
        self,
        segments: list[Segment],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        timestamp: int,
    ) -> None:
        self._segments = segments
        self._keys = keys
        self._values = values
        self._timestamp = timestamp

    @property
    def record_count(self) -> int:
        return len(self._values)

    def __await__(self) -> Generator[Any, None, list[RecordMetadata]]:
        seen: set[int] = set()
        for seg in self._segments:
            future = seg.batch.future
            if id(future) in seen:
                continue
            seen.add(id(future))
            if not future.done():
                yield from asyncio.shield(future).__await__()
        return self._metadata()

    def done(self) -> bool:
        return all(seg.batch.future.done() for seg in self._segments)

    async def wait(self) -> None:
        """Wait until every record's fate is known; raise the first delivery error.

        Awaiting the delivery itself also builds a ``RecordMetadata`` per record, which
        costs about as much as buffering the record did: callers that only need to know
        that all went (a bulk writer) wait for this instead."""
        for future in dict.fromkeys(seg.batch.future for seg in self._segments):
            if not future.done():
                await asyncio.wait((future,))  # cancelling the caller leaves the batch be
        for batch, _, first_delta, count in self._segments:
            if batch.split is None:
                batch.future.result()  # raises the batch's delivery error
            else:  # only this call's records of a split batch count
                for delta in range(first_delta, first_delta + count):
                    settled(batch, delta)[0].result()

    def _metadata(self) -> list[RecordMetadata]:
        # Built with map/zip over each segment's slice, not a constructor call per
        # record (about 15% of the time; the tuples themselves cost the rest).
        out: list[RecordMetadata] = []
        keys, values, ts = self._keys, self._values, self._timestamp
        for batch, start, first_delta, count in self._segments:
            if batch.split is not None:
                out.extend(self._split_metadata(batch, start, first_delta, count))
                continue
            base, append_time, log_start = batch.future.result()  # raises the batch's error
            stop = start + count
            if append_time >= 0:
                when, kind = append_time, LOG_APPEND_TIME
            else:
                when, kind = ts, CREATE_TIME
            first = base + first_delta
            offsets: Iterable[int] = range(first, first + count) if base >= 0 else repeat(-1)
            key_sizes = repeat(-1) if keys is None else _sizes(keys[start:stop])
            out.extend(
                map(
                    _new_metadata,
                    zip(
                        repeat(batch.topic, count),
                        repeat(batch.partition),
                        offsets,
                        repeat(when),
                        key_sizes,
                        _sizes(values[start:stop]),
                        repeat(kind),
                        repeat(log_start),
                    ),
                )
            )
        return out

    def _split_metadata(
        self, batch: ProducerBatch, start: int, first_delta: int, count: int
    ) -> list[RecordMetadata]:
        """One segment of a batch that was split: record by record (rare)."""
        keys, values = self._keys, self._values
        out = []
        for i in range(count):
            future, delta = settled(batch, first_delta + i)
            key = None if keys is None else keys[start + i]
            value = values[start + i]
            out.append(
                record_metadata(
                    batch,
                    future.result(),  # raises the record's delivery error
                    delta,
                    self._timestamp,
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                )
            )
        return out


def _sizes(items: Sequence[bytes | None]) -> list[int]:
    """Serialized sizes, -1 for None."""
    try:
        return list(map(len, items))  # type: ignore[arg-type]
    except TypeError:  # a None among them
        return [-1 if item is None else len(item) for item in items]


# RecordMetadata from a ready tuple of its fields, without the Python-level __new__
_new_metadata: Callable[[tuple[Any, ...]], RecordMetadata] = partial(tuple.__new__, RecordMetadata)


async def wait_delivered(handles: Iterable[DeliveryFuture]) -> None:
    """Wait until every record of ``handles`` has been delivered; raise the first
    delivery error met (in the order of ``handles``).

    The cheap way to wait for many ``send()`` handles: one wait per batch, not per
    record, and no ``RecordMetadata`` built (``asyncio.gather(*handles)`` gives the
    metadata, at about 2.5 us a record). Cancelling the caller leaves the records be,
    and a cancelled handle's record is still waited for (its delivery goes on).
    A record sent before its topic's metadata was known is waited for in its own
    batch, not the topic's whole first burst (as ``await handle``).
    """
    if not isinstance(handles, (list, tuple)):
        handles = list(handles)  # read again below if a batch was split
    futures: dict[asyncio.Future[BatchResult] | DeliveryFuture, ProducerBatch] = {}
    for handle in handles:
        batch = handle._batch
        if batch is None:
            assert handle._error is not None
            raise handle._error
        # a record sent before its topic was known is waited for alone: its stand-in
        # batch resolves once every record of the topic's first burst is
        futures[handle if batch.builder is None else batch.future] = batch
    for future, batch in futures.items():
        if isinstance(future, DeliveryFuture):
            if not record_done(batch, future._delta):
                await _record_fate(future)
            settled(batch, future._delta)[0].result()  # raises the record's error
            continue
        if not future.done():
            await asyncio.wait((future,))
        if batch.split is None:
            future.result()  # raises the batch's delivery error
        elif future.exception() is not None:  # a record of it failed: one of these?
            for handle in handles:
                if handle._batch is batch:
                    settled(batch, handle._delta)[0].result()


async def _record_fate(handle: DeliveryFuture) -> None:
    """Wait until the fate of ``handle``'s record is known, even if the handle is
    cancelled (a record sent before its topic's metadata was known: its place)."""
    batch = handle._batch
    assert batch is not None
    waiter: asyncio.Future[None] = batch.future.get_loop().create_future()
    # an OnDelivery runs at the record's fate even if the handle is cancelled
    handle.add_done_callback(OnDelivery(partial(_set_done, waiter)))
    await asyncio.wait((waiter,))  # cancelling the caller leaves the record be


def _set_done(waiter: asyncio.Future[None], _error: object, _meta: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


def first_delivered(handles: Sequence[DeliveryFuture]) -> asyncio.Future[RecordMetadata]:
    """One future for records sent together: the first record's metadata once every
    record is delivered, or the first error."""
    loop = asyncio.get_running_loop()
    out: asyncio.Future[RecordMetadata] = loop.create_future()
    pending = {id(h.batch): h for h in handles}

    def one_done(handle: DeliveryFuture) -> None:
        if out.done():
            return
        error = handle.exception()
        batch = handle.batch
        if error is None and batch is not None and batch.split is not None:
            # split: each record's outcome is its piece's, not the watched one's
            for each in handles:
                if each._batch is batch and (error := each.exception()) is not None:
                    break
        if error is not None:
            out.set_exception(error)
            out.exception()  # the caller may never await it
            return
        pending.pop(id(batch), None)
        if not pending:
            out.set_result(handles[0].result())

    for handle in list(pending.values()):
        handle.add_done_callback(one_done)
    return out
