"""Loops shared by the adapters: what "produce N records", "consume N records" and "a
fixed-rate latency run" mean, written once so every client does the same work.

The async loops take small callables from the adapter (send one value, flush, fetch a
batch of values); the sync clients use the counters and latency recorder directly.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from benchmarks.clients.alarm import Alarm
from benchmarks.payloads import POOL_SIZE, WARMUP_SEQ, read_stamp, stamp, value_pool
from benchmarks.scenarios import Job
from benchmarks.stats import latency_summary

_IDLE_POLL_S = 0.5


class MeterLike(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


class Delivery:
    """Counts delivery reports; the first error is kept for the report."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_error: str | None = None

    def ok(self) -> None:
        self.acked += 1

    def error(self, err: object, count: int = 1) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = repr(err)

    def future_done(self, fut: Any) -> None:
        """``add_done_callback`` target for asyncio-style futures (and a tally for any
        finished future with ``exception()``)."""
        if getattr(fut, "cancelled", bool)():
            self.error("cancelled")
        elif fut.exception() is not None:
            self.error(fut.exception())
        else:
            self.acked += 1

    def fields(self) -> dict[str, Any]:
        return {"acked": self.acked, "failed": self.failed, "delivery_error": self.first_error}


class Consumed:
    """Counts consumed values and checks their sizes."""

    def __init__(self, value_size: int) -> None:
        self.size = value_size
        self.count = 0
        self.bytes = 0
        self.bad_size = 0

    def add(self, values: Iterable[bytes | None]) -> None:
        # C-level map/sum/count: a Python loop here cost about 0.3 us per record, the
        # same for every client, which hid how far apart the clients themselves are.
        vals = values if isinstance(values, list) else list(values)
        try:
            lengths = list(map(len, vals))  # type: ignore[arg-type]
        except TypeError:  # a None (tombstone) value: counted as a wrong size
            lengths = [-1 if v is None else len(v) for v in vals]
        self.count += len(lengths)
        self.bytes += sum(lengths) + lengths.count(-1)
        self.bad_size += len(lengths) - lengths.count(self.size)

    def fields(self) -> dict[str, Any]:
        return {"consumed": self.count, "bytes": self.bytes, "bad_size": self.bad_size}


class LatencyRecorder:
    """Receives stamped values; latency is measured from the *intended* send time, so a
    client that falls behind the schedule is charged for it (no coordinated omission)."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.seen = bytearray(records)
        self.latencies_ms: list[float] = []
        self.received = 0
        self.duplicates = 0
        self.unknown = 0
        self.warmup_seen = False

    def add(self, values: Iterable[bytes | None]) -> None:
        now = time.perf_counter_ns()
        for v in values:
            if v is None or len(v) < 16:
                self.unknown += 1
                continue
            seq, sent_ns = read_stamp(v)
            if seq == WARMUP_SEQ:
                self.warmup_seen = True
            elif 0 <= seq < self.records:
                if self.seen[seq]:
                    self.duplicates += 1
                else:
                    self.seen[seq] = 1
                    self.received += 1
                    self.latencies_ms.append((now - sent_ns) / 1e6)
            else:
                self.unknown += 1

    @property
    def done(self) -> bool:
        return self.received >= self.records

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "received": self.received,
            "duplicates": self.duplicates,
            "unknown": self.unknown,
            "warmup_records": 1,
        }
        if self.latencies_ms:
            out["latency"] = latency_summary(self.latencies_ms)
        return out


#: without a timer fd: how long before a send time ``Schedule.pace`` stops sleeping and
#: starts yielding
SPIN_S = 0.0015


class Schedule:
    """Intended send times of a fixed-rate run."""

    def __init__(self, rate: int) -> None:
        self.interval_ns = int(1e9 / rate)
        self.t0 = 0
        self._alarm: Alarm | None = None
        #: "timer fd" or "busy wait", set by the first ``pace``; None until then
        self.pacing: str | None = None

    def begin(self) -> None:
        self.t0 = time.perf_counter_ns() + 1_000_000

    def due(self, i: int) -> int:
        return self.t0 + i * self.interval_ns

    def wait_s(self, i: int) -> float:
        return (self.due(i) - time.perf_counter_ns()) / 1e9

    async def pace(self, i: int) -> None:
        """Wait for record ``i``'s send time on the event loop as closely as the
        blocking adapters' ``time.sleep`` does (tens of microseconds), with the loop
        asleep meanwhile: a timer fd the loop watches (see ``alarm``). Where there is
        none, the last stretch yields to the loop until due, a busy wait that keeps a
        CPU busy (a plain ``asyncio.sleep`` wakes up to 1 ms late: epoll's timeout is
        whole milliseconds, rounded up)."""
        due = self.due(i)
        if self.pacing is None:
            self._alarm = Alarm.open()
            self.pacing = "busy wait" if self._alarm is None else "timer fd"
        if self._alarm is not None:
            await self._alarm.until(due)
            return
        wait = (due - time.perf_counter_ns()) / 1e9
        if wait > SPIN_S:
            await asyncio.sleep(wait - SPIN_S)
        # a busy wait on purpose: there is no event to wait for, only the clock
        while time.perf_counter_ns() < due:  # noqa: ASYNC110
            await asyncio.sleep(0)

    @property
    def busy_waits(self) -> bool:
        """Whether ``pace`` spins (no timer fd here); known after its first call."""
        return self.pacing == "busy wait"

    def close(self) -> None:
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None


def _is_done(aw: Any) -> bool:
    done = getattr(aw, "done", None)
    return bool(done()) if done is not None else False


def values_for(job: Job) -> list[bytes]:
    return value_pool(job.scenario.value_size)


def transactional_id(job: Job) -> str:
    """Each run its own: no client fences another, and none inherits an open
    transaction from an earlier run."""
    return f"bench-{job.client}-{job.topic}"


# -- async drivers ----------------------------------------------------------------------

SendFn = Callable[[bytes], Awaitable[Any]]


class Outstanding:
    """What ``send`` returned for each record: asyncio-style futures report to the
    ``Delivery`` through a done callback; other awaitables are kept, oldest first, and
    tallied as they finish (done ones as we go, so memory stays flat)."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.pending: deque[Any] = deque()
        # one callable for every record, as the librdkafka adapters pass one on_delivery
        # (a bound method made per record would be an object per record left to the GC)
        self._done = delivery.future_done

    def add(self, fut: Any, i: int) -> None:
        if hasattr(fut, "add_done_callback"):
            fut.add_done_callback(self._done)
            return
        self.pending.append(fut)
        if i % 1024 == 0:
            while self.pending and _is_done(self.pending[0]):
                self.delivery.future_done(self.pending.popleft())

    async def settle(self, n: int) -> None:
        """Await what is left (after a flush or commit), then let the last done
        callbacks, which run on the loop, have their turn."""
        delivery = self.delivery
        while self.pending:
            aw = self.pending.popleft()
            if _is_done(aw):
                delivery.future_done(aw)
                continue
            try:
                await aw
                delivery.ok()
            except Exception as exc:
                delivery.error(exc)
        for _ in range(100):
            if delivery.acked + delivery.failed >= n:
                break
            await asyncio.sleep(0.01)


async def produce_async(
    job: Job, meter: MeterLike, send: SendFn, flush: Callable[[], Awaitable[Any]]
) -> dict[str, Any]:
    """``send(value)`` waits for buffer space and returns a delivery future (asyncio
    style: ``add_done_callback``) or another awaitable, which is awaited after flush."""
    pool = values_for(job)
    n = job.scenario.records
    delivery = Delivery()
    outstanding = Outstanding(delivery)
    meter.start()
    for i in range(n):
        outstanding.add(await send(pool[i % POOL_SIZE]), i)
    await flush()
    await outstanding.settle(n)
    meter.stop()
    return delivery.fields()


async def produce_txn_async(
    job: Job,
    meter: MeterLike,
    send: SendFn,
    begin: Callable[[], Awaitable[Any]],
    commit: Callable[[], Awaitable[Any]],
) -> dict[str, Any]:
    """``produce_async`` in transactions of ``txn_records`` records: begin, send them,
    commit (which delivers them), then the next. A failed commit raises: the run fails."""
    pool = values_for(job)
    n, size = job.scenario.records, job.scenario.txn_records
    delivery = Delivery()
    outstanding = Outstanding(delivery)
    committed = 0
    meter.start()
    for first in range(0, n, size):
        await begin()
        for i in range(first, min(first + size, n)):
            outstanding.add(await send(pool[i % POOL_SIZE]), i)
        await commit()
        committed += 1
    await outstanding.settle(n)
    meter.stop()
    return {**delivery.fields(), "transactions": committed}


FetchFn = Callable[[], Awaitable[Iterable[bytes | None]]]


class ConsumeClock:
    """Consume throughput is timed from the first poll that returned records: client
    start-up (connections, offset lookup, the first long poll) differs by 0.1-0.5 s
    between clients and would swamp a short run. That first batch is not counted in
    ``measured_records``; the start-up time is reported apart."""

    def __init__(self, meter: MeterLike) -> None:
        self.meter = meter
        self.t_begin = time.perf_counter()
        self.first_batch: int | None = None
        self.startup_s: float | None = None

    def batch(self, count: int) -> None:
        if self.first_batch is None and count:
            self.first_batch = count
            self.startup_s = time.perf_counter() - self.t_begin
            self.meter.start()

    def stop(self, consumed: int) -> dict[str, Any]:
        if self.first_batch is None:
            self.meter.start()  # nothing came: an empty, invalid run
        self.meter.stop()
        return {"measured_records": consumed - (self.first_batch or 0),
                "startup_s": self.startup_s}


async def consume_async(job: Job, meter: MeterLike, fetch: FetchFn) -> dict[str, Any]:
    """Calls ``fetch()`` (one poll, returning the values it got) until N records came or
    the job's time runs out."""
    n = job.scenario.records
    seen = Consumed(job.scenario.value_size)
    deadline = time.monotonic() + job.timeout_s * 0.8
    clock = ConsumeClock(meter)
    while seen.count < n and time.monotonic() < deadline:
        values = await fetch()
        seen.add(values)
        clock.batch(seen.count)
    return {**seen.fields(), **clock.stop(seen.count)}


def consume_sync(job: Job, meter: MeterLike, fetch: Callable[[], Iterable[bytes | None]]
                 ) -> dict[str, Any]:
    """``consume_async`` for blocking clients."""
    n = job.scenario.records
    seen = Consumed(job.scenario.value_size)
    deadline = time.monotonic() + job.timeout_s * 0.8
    clock = ConsumeClock(meter)
    while seen.count < n and time.monotonic() < deadline:
        seen.add(fetch())
        clock.batch(seen.count)
    return {**seen.fields(), **clock.stop(seen.count)}


async def latency_async(
    job: Job,
    meter: MeterLike,
    send: SendFn,
    flush: Callable[[], Awaitable[Any]],
    fetch: FetchFn,
) -> dict[str, Any]:
    """A producer task sends stamped values at the scenario's rate while a consumer task
    in the same event loop reads them back."""
    n = job.scenario.records
    pool = values_for(job)
    rec = LatencyRecorder(n)
    delivery = Delivery()
    deadline = time.monotonic() + job.timeout_s * 0.8

    async def consume() -> None:
        while not rec.done and time.monotonic() < deadline:
            rec.add(await fetch())

    schedule = Schedule(job.scenario.rate)
    consumer = asyncio.create_task(consume())  # awaited (or cancelled) below
    try:
        # warm-up: one record end to end, so connections and positions exist
        fut = await send(stamp(pool[0], WARMUP_SEQ, time.perf_counter_ns()))
        await fut
        while not rec.warmup_seen and time.monotonic() < deadline:
            if consumer.done():
                consumer.result()
                break
            await asyncio.sleep(0.005)
        meter.start()
        schedule.begin()
        for i in range(n):
            await schedule.pace(i)
            fut = await send(stamp(pool[i % POOL_SIZE], i, schedule.due(i)))
            if hasattr(fut, "add_done_callback"):
                fut.add_done_callback(delivery.future_done)
            else:
                await fut
                delivery.ok()
        await flush()
        await consumer
        meter.stop()
    finally:
        schedule.close()
        if not consumer.done():
            consumer.cancel()
            try:
                await consumer
            except asyncio.CancelledError:
                pass
    return {**delivery.fields(), **rec.fields(), "pacing": schedule.pacing}
