"""``aiokproto produce TOPIC`` and ``aiokproto consume TOPIC...``. produce reads stdin
or a file and prints a summary; plain and ``-K`` lines go straight to ``send()``, one
handle kept per batch and waited for a generation late, with ``wait_delivered`` and
the batch's own future, which fails if any record of it did (within 1.5x a ``send()``
loop's CPU). consume: Ctrl-C commits what was printed; an explicit
``--timeout`` ends it once idle; a hint when no group is given."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any, NoReturn

import click

from aiokproto.admin import Admin
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.cli.common import (
    CliError,
    Settings,
    command,
    err,
    out,
    print_json,
    progress,
    stop_on_signals,
    usage,
)
from aiokproto.cli.formats import FormatError, RecordFormatter, parse_headers, parse_line
from aiokproto.cli.plan import PlanError, parse_datetime
from aiokproto.cli.reader import ChunkReader, read_line_lists
from aiokproto.consumer import Consumer
from aiokproto.errors import UnknownTopicOrPartitionError
from aiokproto.producer import Producer, wait_delivered
from aiokproto.structs import TopicPartition

#: undelivered records awaited together: bounds memory on a large file
_IN_FLIGHT = 5_000
#: consume --timeout: how long joining a group may take before the wait counts (a
#: broker delays a new group's first rebalance by group.initial.rebalance.delay.ms, 3 s)
_JOIN_GRACE_S = 60.0


async def _delivered(handles: list[Any]) -> None:
    """``wait_delivered``, and the first error of any record of the handles' batches:
    one handle is kept per batch, and it tells its own record's fate only (the records
    sent before the topic's metadata was known share one stand-in batch, and a batch
    the broker refused as too large is cut in pieces whose records fail alone)."""
    await wait_delivered(handles)
    for future in dict.fromkeys(h.batch.future for h in handles if h.batch is not None):
        if not future.done():
            await asyncio.wait((future,))  # cancelling the caller leaves the batch be
        future.result()  # a batch's future fails if any of its records did


async def _partition_counts(admin: Admin, topics: list[str]) -> dict[str, int]:
    """Partitions per topic; an unknown topic is a clear error here rather than a wait
    for metadata that never comes (nor auto-creation: a typo must not make a topic)."""
    try:
        found = await admin.describe_topics(topics)
    except AdminBatchError as exc:
        missing = [t for t, e in exc.errors.items() if isinstance(e, UnknownTopicOrPartitionError)]
        if missing:
            raise CliError(
                f"unknown topic {missing[0]!r}: create it first (aiokproto topics create "
                f"{missing[0]}), or check the name (aiokproto topics list)"
            ) from None
        raise
    return {t: len(found[t].partitions) for t in topics}


@command(None, "produce")
@click.argument("topic")
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False, exists=True),
              help="Read records from this file instead of stdin.")
@click.option("--key-separator", "-K", metavar="SEP",
              help="Each line is KEY<SEP>VALUE (e.g. -K ':').")
@click.option("--headers", "-H", metavar="K=V[,K=V]", help="Headers added to every record.")
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Send every record here.")
@click.option("--json", "json_input", is_flag=True,
              help='Each line is {"key": ..., "value": ..., "headers": {...}, "partition": N}.')
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default=None, help="[default: none]")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default=None, help="[default: all]")
@click.option("--linger-ms", type=click.IntRange(min=0), default=None, help="[default: 5]")
async def produce(
    settings: Settings,
    topic: str,
    path: str | None,
    key_separator: str | None,
    headers: str | None,
    partition: int | None,
    json_input: bool,
    compression: str | None,
    acks: str | None,
    linger_ms: int | None,
) -> None:
    """Send one record per line of stdin (or --file) to TOPIC; prints a summary.

    Ctrl-C ends the input at once: the lines read so far are still delivered, then the
    summary is printed and the exit code is 0 (a second Ctrl-C gives up: exit 130)."""
    if json_input and key_separator is not None:
        usage("--json and --key-separator do not go together")
    if key_separator == "":
        usage("--key-separator must not be empty")
    try:
        static_headers = parse_headers(headers) if headers else ()
    except FormatError as exc:
        usage(str(exc))
    async with settings.admin() as admin:
        partitions = (await _partition_counts(admin, [topic]))[topic]
    if partition is not None and partition >= partitions:
        usage(f"--partition {partition}: {topic} has partitions 0..{partitions - 1}")
    options: dict[str, Any] = {**settings.client, **settings.file.producer}
    options["max_block_ms"] = settings.timeout_ms  # a dead cluster fails within --timeout
    for name, value in (("compression_type", compression), ("acks", acks),
                        ("linger_ms", linger_ms)):
        if value is not None:
            options[name] = value
    sep = key_separator.encode() if key_separator is not None else None
    # the reads happen in a daemon thread (see reader.py): Ctrl-C never waits for them
    fd = os.open(path, os.O_RDONLY) if path else sys.stdin.fileno()
    total_size = os.fstat(fd).st_size if path else None
    count = payload = 0
    began = time.monotonic()
    try:
        async with Producer(**options) as producer:
            reader = ChunkReader(fd)
            pending: list[Any] = []  # handles of the records sent since the last check
            older: list[Any] = []  # those sent before: waited for at the next check
            held_by_linger = producer.options.linger_ms > 50
            with progress(in_bytes=True) as bar, stop_on_signals(reader.stop):
                task = bar.add_task(f"producing to {topic}", total=total_size, rate="",
                                    visible=total_size is not None)
                line_no = checked = 0
                # each line the value of one record (or KEY<SEP>VALUE): no parsing step
                # and no object kept per line
                fast = not json_input and not static_headers
                send = producer.send
                last_batch: object = ()
                async for lines in read_line_lists(reader, lambda n: bar.advance(task, n)):
                    if fast:
                        first = line_no + 1
                        line_no += len(lines)
                        for n, data in enumerate(lines, first):
                            if not data:
                                continue  # blank lines are not records
                            key: bytes | None = None
                            if sep is not None:
                                key, found, data = data.partition(sep)
                                if not found:
                                    _refuse(key, n, sep, count)
                                payload += len(key)
                            handle = await send(topic, data, key, partition)
                            count += 1
                            payload += len(data)
                            # one handle per batch is enough to wait for it (and keeping
                            # fewer alive spares the cyclic GC: 20% of the CPU here)
                            batch = handle.batch
                            if batch is not last_batch:
                                if batch is None:
                                    await handle  # refused before buffering: raises
                                last_batch = batch
                                pending.append(handle)
                    else:
                        for line in lines:
                            line_no += 1
                            if not line and not json_input:
                                continue  # blank lines are not records
                            try:
                                rec = parse_line(line, line_no, key_separator=sep,
                                                 json_input=json_input, headers=static_headers)
                            except FormatError as exc:
                                raise CliError(
                                    f"{exc} ({count} records sent before it)"
                                ) from None
                            part = partition if rec.partition is None else rec.partition
                            pending.append(await send(
                                topic, rec.value, rec.key, part, headers=rec.headers or None
                            ))
                            count += 1
                            payload += len(rec.value or b"") + len(rec.key or b"")
                    if count - checked >= _IN_FLIGHT:
                        checked = count
                        # Wait for the records before these (sent by now), not these:
                        # the cluster keeps working meanwhile. Only a long --linger-ms
                        # could keep them waiting: send them now then.
                        if held_by_linger:
                            await producer.flush()
                        await _delivered(older)  # one wait per batch, not record
                        older, pending = pending, []
                        rate = count / max(time.monotonic() - began, 1e-9)
                        bar.update(task, rate=f"{rate:,.0f} rec/s")
                # Ctrl-C ends the input: what was read is still delivered (a second
                # Ctrl-C gives up on that too)
                await producer.flush()
                await _delivered(older)
                await _delivered(pending)
            interrupted = reader.stopped
    finally:
        if path:
            os.close(fd)
    elapsed = time.monotonic() - began
    summary = {
        "topic": topic,
        "records": count,
        "bytes": payload,
        "seconds": round(elapsed, 3),
        "records_per_second": round(count / elapsed, 1) if elapsed else None,
        "mb_per_second": round(payload / elapsed / 1e6, 3) if elapsed else None,
        "interrupted": interrupted,
    }
    if interrupted:
        err.print("interrupted: stopped reading; what was read is delivered", highlight=False)
    if settings.json:
        print_json(summary)
    else:
        out.print(
            f"produced {count:,} records ({payload:,} bytes) to {topic} in {elapsed:.2f} s: "
            f"{summary['records_per_second'] or 0:,.0f} records/s, "
            f"{summary['mb_per_second'] or 0:.2f} MB/s",
            highlight=False,
        )


def _refuse(line: bytes, line_no: int, sep: bytes, count: int) -> NoReturn:
    """A line without the key separator: parse_line's error, with the count sent."""
    try:
        parse_line(line, line_no, key_separator=sep)
    except FormatError as exc:
        raise CliError(f"{exc} ({count} records sent before it)") from None
    raise CliError(f"line {line_no}: no key separator")  # parse_line refuses it first


@command(None, "consume")
@click.argument("topics", nargs=-1, required=True, metavar="TOPIC...")
@click.option("--group", "-g", help="Consume as a member of this group; commits what it printed.")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset (in a group: where nothing is committed).")
@click.option("--offset", metavar="N|earliest|latest",
              help="Start every partition (or --partition) at this offset; not with --group.")
@click.option("--timestamp", metavar="WHEN",
              help="Start at the first record at or after WHEN (ISO 8601 or ms); not with "
              "--group.")
@click.option("--partition", "partitions", multiple=True, type=click.IntRange(min=0),
              help="Only these partitions (repeatable); not with --group.")
@click.option("--count", "-n", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--format", "-F", "template", default=None, metavar="TEMPLATE|json",
              help="A template over {topic} {partition} {offset} {timestamp} {key} {value} "
              "{headers}, or json [default: {value}; json with --output json].")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
async def consume(
    settings: Settings,
    topics: tuple[str, ...],
    group: str | None,
    from_beginning: bool,
    offset: str | None,
    timestamp: str | None,
    partitions: tuple[int, ...],
    count: int | None,
    template: str | None,
    isolation_level: str,
) -> None:
    """Print records of TOPICs until --count or Ctrl-C (which stops cleanly and, in a
    group, commits the offsets of the records printed)."""
    try:
        formatter = RecordFormatter(template or ("json" if settings.json else "{value}"))
    except FormatError as exc:
        usage(str(exc))
    starts = [o for o in (from_beginning and "--from-beginning", offset and "--offset",
                          timestamp and "--timestamp") if o]
    if len(starts) > 1:
        usage(f"give one of {', '.join(starts)}")
    if group and (offset or timestamp or partitions):
        usage("--offset, --timestamp and --partition choose partitions and positions; a "
              "group does that itself: drop them or --group")
    seek_to: int | str | None = None
    if offset is not None:
        if offset in ("earliest", "latest"):
            seek_to = offset
        elif offset.isdigit():
            seek_to = int(offset)
        else:
            usage(f"--offset takes a number, earliest or latest, not {offset!r}")
    when: int | None = None
    if timestamp is not None:
        try:
            when = parse_datetime(timestamp)
        except PlanError as exc:
            usage(str(exc).replace("--to-datetime", "--timestamp"))
    async with settings.admin() as admin:
        counts = await _partition_counts(admin, list(topics))
    for t, n in counts.items():
        bad = [p for p in partitions if p >= n]
        if bad:
            usage(f"--partition {bad[0]}: {t} has partitions 0..{n - 1}")
    options: dict[str, Any] = {**settings.client, **settings.file.consumer}
    options["isolation_level"] = isolation_level
    options["auto_offset_reset"] = "earliest" if from_beginning else "latest"
    if group:
        options["group_id"] = group
        options["enable_auto_commit"] = False  # only what was printed is committed
    else:
        options.pop("group_id", None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    printed: dict[TopicPartition, int] = {}
    seen = 0
    if not group and seek_to is None and when is None and not from_beginning:
        err.print(
            "no --group: reading new records from the end of each partition; use "
            "--from-beginning, --offset or --timestamp for the records already there",
            highlight=False,
        )
    # an explicit --timeout also ends the command once no record came for that long
    idle_s = settings.timeout_ms / 1000 if settings.timeout_given else None
    began = time.monotonic()
    try:
        consumer = Consumer(*(topics if group else ()), **options)
        await consumer.start()
        try:
            if not group:
                tps = [TopicPartition(t, p) for t in topics
                       for p in (partitions or range(counts[t]))]
                consumer.assign(tps)
                await _position(consumer, tps, seek_to, when)
            seen = await _print_records(consumer, formatter, count, stop, printed, idle_s)
            if group and printed:
                await consumer.commit({tp: o + 1 for tp, o in printed.items()})
        finally:
            await consumer.stop()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    elapsed = time.monotonic() - began
    committed = " (offsets committed)" if group and printed else ""
    err.print(f"consumed {seen:,} records in {elapsed:.2f} s{committed}", highlight=False)
    if idle_s is not None and not stop.is_set() and (count is None or seen < count):
        # ended by --timeout: a success if it printed what there was; none at all, or
        # fewer than --count, is an error (exit 1) as for perf consume
        if seen == 0 or count is not None:
            wanted = "no record" if seen == 0 else f"{seen:,} of {count:,} records"
            raise CliError(f"{wanted} within --timeout {idle_s:g} s")


async def _position(
    consumer: Consumer, tps: list[TopicPartition], seek_to: int | str | None, when: int | None
) -> None:
    if seek_to == "earliest":
        await consumer.seek_to_beginning(*tps)
    elif seek_to == "latest":
        await consumer.seek_to_end(*tps)
    elif isinstance(seek_to, int):
        for tp in tps:
            consumer.seek(tp, seek_to)
    elif when is not None:
        found = await consumer.offsets_for_times(dict.fromkeys(tps, when))
        late = [tp for tp, o in found.items() if o is None]
        for tp, o in found.items():
            if o is not None:
                consumer.seek(tp, o.offset)
        if late:
            await consumer.seek_to_end(*late)


async def _print_records(
    consumer: Consumer,
    formatter: RecordFormatter,
    count: int | None,
    stop: asyncio.Event,
    printed: dict[TopicPartition, int],
    idle_s: float | None = None,
) -> int:
    """Print until ``count`` records, ``stop``, or ``idle_s`` seconds without a record;
    ``printed`` gets the last offset written per partition (what a group commits)."""
    seen = 0
    began = last = time.monotonic()
    joined = False
    with progress() as bar:
        task = bar.add_task("consuming", total=count, rate="", visible=count is not None)
        while not stop.is_set() and (count is None or seen < count):
            limit = 500 if count is None else min(500, count - seen)
            wait_ms = 200
            if idle_s is not None:
                now = time.monotonic()
                if not joined:  # the wait for records starts once partitions are assigned
                    joined = bool(consumer.assignment()) or now - began >= _JOIN_GRACE_S
                    last = now
                left = last + idle_s - now
                if left <= 0:
                    break
                wait_ms = max(1, min(wait_ms, int(left * 1000)))
            batches = await consumer.getmany(timeout_ms=wait_ms, max_records=limit)
            lines: list[str] = []
            ends: dict[TopicPartition, int] = {}
            for tp, records in batches.items():
                for r in records[: None if count is None else count - seen - len(lines)]:
                    lines.append(formatter(r.topic, r.partition, r.offset, r.timestamp,
                                           r.key, r.value, r.headers))
                    ends[tp] = r.offset
            if lines:
                try:
                    sys.stdout.write("\n".join(lines) + "\n")
                    sys.stdout.flush()
                except BrokenPipeError:  # `| head`: the reader has what it wanted
                    _silence_stdout()
                    stop.set()
                    break
                printed.update(ends)  # only what reached stdout counts as printed
                seen += len(lines)
                last = time.monotonic()
                bar.advance(task, len(lines))
    return seen


def _silence_stdout() -> None:
    # later writes (and the interpreter's flush at exit) must not raise again
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
