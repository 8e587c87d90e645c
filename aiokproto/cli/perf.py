"""``aiokproto perf produce|consume``: throughput and latency against the cluster, in
the manner of Kafka's kafka-producer-perf-test and kafka-consumer-perf-test.

While it runs, a live display on stderr (a terminal only) shows the last half second:
records/s, MB/s and, producing, the latency avg/p50/p99/max. At the end, one line of
figures about this run alone (``--output json``: the same figures as JSON). Ctrl-C
stops early and reports what was done.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import click
from rich.console import RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from aiokproto.cli.common import (
    CliError,
    Settings,
    command,
    err,
    out,
    print_json,
    stop_on_signals,
)
from aiokproto.cli.io import _partition_counts
from aiokproto.cli.perfstats import (
    Recorder,
    Throttle,
    consume_line,
    consume_summary,
    payload,
    produce_line,
    produce_summary,
    window_text,
)
from aiokproto.consumer import Consumer
from aiokproto.producer import DeliveryFuture, Producer
from aiokproto.structs import TopicPartition

perf = click.Group("perf", help="Measure producing and consuming throughput and latency.")

REFRESH_S = 0.5


class _Display(Progress):
    """A progress bar with the last window's figures on a line of their own (they do
    not fit beside the bar on a narrow terminal)."""

    figures = ""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        if self.figures:
            yield Text(self.figures)


@contextlib.asynccontextmanager
async def _live(title: str, total: int, rec: Recorder, latency: bool) -> AsyncIterator[None]:
    """The live display, refreshed every REFRESH_S (nothing when stderr is no terminal)."""
    bar = _Display(
        SpinnerColumn(),
        TextColumn(title),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )
    task = bar.add_task(title, total=total)

    async def tick() -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            window = rec.take_window(time.perf_counter())
            bar.figures = window_text(window, latency)
            bar.update(task, completed=rec.records)

    with bar:
        ticker = None if bar.disable else asyncio.create_task(tick())
        try:
            yield
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            bar.update(task, completed=rec.records)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, but wake at once on Ctrl-C."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


@command(perf, "produce")
@click.argument("topic")
@click.option("--num-records", "-n", type=click.IntRange(min=1), required=True,
              help="Records to send.")
@click.option("--record-size", "-s", type=click.IntRange(min=0), required=True,
              metavar="BYTES", help="Size of each record's value.")
@click.option("--throughput", "-t", type=float, default=None, metavar="RECORDS/S",
              help="Send at most this many records a second [default: no limit].")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default=None, help="[default: all]")
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default=None, help="[default: none]")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, metavar="BYTES",
              help="[default: 1000000]")
@click.option("--linger-ms", type=click.IntRange(min=0), default=None, help="[default: 5]")
async def perf_produce(
    settings: Settings,
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float | None,
    acks: str | None,
    compression: str | None,
    batch_size: int | None,
    linger_ms: int | None,
) -> None:
    """Send --num-records records of --record-size bytes to TOPIC (at most --throughput a
    second) and report records/s, MB/s and the send-to-acknowledgement latency."""
    if throughput is not None and throughput <= 0:
        throughput = None  # kafka-producer-perf-test's -1: no limit
    async with settings.admin() as admin:
        await _partition_counts(admin, [topic])  # an unknown topic: a clear error now
    options: dict[str, Any] = {**settings.client, **settings.file.producer}
    options["max_block_ms"] = settings.timeout_ms
    for name, given in (("acks", acks), ("compression_type", compression),
                        ("batch_size", batch_size), ("linger_ms", linger_ms)):
        if given is not None:
            options[name] = given
    value = payload(record_size)
    stop = asyncio.Event()
    failures: list[BaseException] = []
    clock = time.perf_counter
    began = clock()
    rec = Recorder(num_records, began)

    in_flight = 0
    settled = asyncio.Event()  # set when nothing sent is awaiting its answer

    def delivered(sent_at: float, handle: DeliveryFuture) -> None:
        nonlocal in_flight
        in_flight -= 1
        if not in_flight:
            settled.set()
        try:
            error = handle.exception()
        except asyncio.CancelledError as exc:
            error = exc
        if error is not None:
            failures.append(error)
            stop.set()
        else:
            rec.add(record_size, (clock() - sent_at) * 1000)

    sent = 0
    async with Producer(**options) as producer:
        async with _live(f"producing to {topic}", num_records, rec, latency=True):
            with stop_on_signals(stop.set):
                began = clock()
                rec.take_window(began)
                throttle = Throttle(throughput, began)
                while sent < num_records and not stop.is_set():
                    wait = throttle.delay(sent, clock())
                    if wait:
                        await _pause(stop, wait)
                        continue
                    sent_at = clock()
                    handle = await producer.send(topic, value)
                    in_flight += 1
                    handle.add_done_callback(functools.partial(delivered, sent_at))
                    sent += 1
                if in_flight:
                    settled.clear()  # set again by the last delivery callback
                else:
                    settled.set()
                await producer.flush()
                await settled.wait()  # the callbacks run soon after their batch's answer
                elapsed = clock() - began
    if failures:
        raise failures[0]
    summary = {"topic": topic, **produce_summary(rec, elapsed), "interrupted": sent < num_records}
    _report(settings, summary, produce_line(summary))


def _report(settings: Settings, summary: dict[str, Any], line: str) -> None:
    if summary["interrupted"]:
        err.print("interrupted: the figures are for what was done", highlight=False)
    if settings.json:
        print_json(summary)
    else:
        out.print(line, highlight=False)


@command(perf, "consume")
@click.argument("topic")
@click.option("--num-records", "-n", type=click.IntRange(min=1), required=True,
              help="Records to consume.")
@click.option("--group", "-g",
              help="Consume as this group (from its committed offsets; commits at the end). "
              "Without it, every partition is read from the beginning.")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True, metavar="SECONDS",
              help="Give up when no record comes for this long (exit 1, figures printed).")
async def perf_consume(
    settings: Settings, topic: str, num_records: int, group: str | None, idle_timeout: float
) -> None:
    """Consume --num-records records of TOPIC as fast as they come and report records/s,
    MB/s and the time to the first record."""
    async with settings.admin() as admin:
        partitions = (await _partition_counts(admin, [topic]))[topic]
    options: dict[str, Any] = {**settings.client, **settings.file.consumer}
    options["auto_offset_reset"] = "earliest"
    if group:
        options["group_id"] = group
        options["enable_auto_commit"] = False  # commits what this run consumed, at the end
    else:
        options.pop("group_id", None)
    stop = asyncio.Event()
    clock = time.perf_counter
    rec = Recorder(num_records, clock())
    first: float | None = None
    idle = False
    consumer = Consumer(*((topic,) if group else ()), **options)
    await consumer.start()
    try:
        if not group:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
        async with _live(f"consuming {topic}", num_records, rec, latency=False):
            with stop_on_signals(stop.set):
                began = last = clock()
                rec.take_window(began)
                while rec.records < num_records and not stop.is_set():
                    batches = await consumer.getmany(
                        timeout_ms=100, max_records=min(10_000, num_records - rec.records)
                    )
                    now = clock()
                    if not batches:
                        if now - last > idle_timeout:
                            idle = True
                            break
                        continue
                    last = now
                    first = now - began if first is None else first
                    for records in batches.values():
                        rec.add_many(len(records), _size(records))
                elapsed = (last if idle else clock()) - began
        if group and rec.records:
            await consumer.commit()
    finally:
        await consumer.stop()
    summary = {"topic": topic, **consume_summary(rec, elapsed, first),
               "interrupted": stop.is_set() and rec.records < num_records}
    _report(settings, summary, consume_line(summary))
    if idle:
        raise CliError(f"only {rec.records} of {num_records} records: none came for "
                       f"{idle_timeout:g} s")


def _size(records: list[Any]) -> int:
    total = 0
    for r in records:
        key, value = r.key, r.value
        total += (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    return total

