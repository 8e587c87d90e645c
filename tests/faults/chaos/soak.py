"""Soak: steady produce + consume in one process, watching for slow leaks.

    python -m tests.faults.chaos.soak --minutes 30 [--bootstrap HOST:PORT] [--json out.json]

Without ``--bootstrap`` it starts its own single-node Kafka. An idempotent producer sends
``--rate`` records/s of sequenced values; a group consumer reads them and checks each
partition's sequence (no gap, no repeat). Every ``--sample-seconds`` it samples this
process's RSS (``/proc/self/status`` VmRSS), open file descriptors (``/proc/self/fd``)
and asyncio task count; at the end it fits a least-squares line to each (after the
warm-up) and reports the slopes per hour and whether they are flat.

A metric is flat when its fitted growth is at most ``max(limit per hour, noise / window
in hours)``: long runs are held to the hourly limit, short runs only to the noise
tolerance (a one-minute run cannot tell 10 MiB/h from noise, but it does catch a
descriptor or a task per second). Exit status 0: no errors, everything read, all flat.
Bookkeeping is O(partitions), so the soak itself does not grow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiokproto import Admin, Consumer, NewTopic, Producer
from aiokproto.errors import KafkaError
from aiokproto.producer import DeliveryFuture
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka
from tests.faults.chaos.ledger import decode, encode


@dataclass(frozen=True)
class Limit:
    per_hour: float  # allowed growth per hour on a long run
    noise: float  # allowed fitted growth over any window (short runs)


LIMITS = {
    "rss_mib": Limit(per_hour=16.0, noise=8.0),
    "fds": Limit(per_hour=2.0, noise=2.0),
    "tasks": Limit(per_hour=2.0, noise=2.0),
}


@dataclass
class Sample:
    t: float  # seconds since the start
    rss_mib: float
    fds: int
    tasks: int


def take_sample(began: float) -> Sample:
    rss_kib = 0
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
                break
    return Sample(
        t=time.monotonic() - began,
        rss_mib=rss_kib / 1024,
        fds=len(os.listdir("/proc/self/fd")),
        tasks=len(asyncio.all_tasks()),
    )


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 with fewer than two distinct xs)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def judge(samples: list[Sample], warmup_s: float) -> dict[str, Any]:
    """Slope per hour and verdict per metric, over the samples after the warm-up."""
    kept = [s for s in samples if s.t >= warmup_s]
    if len(kept) < 3:
        return {"error": f"only {len(kept)} samples after a {warmup_s:.0f} s warm-up"}
    xs = [s.t for s in kept]
    window_h = (xs[-1] - xs[0]) / 3600
    out: dict[str, Any] = {"window_s": round(xs[-1] - xs[0], 1), "samples": len(kept)}
    for name, limit in LIMITS.items():
        ys = [float(getattr(s, name)) for s in kept]
        per_hour = slope(xs, ys) * 3600
        allowed = max(limit.per_hour, limit.noise / window_h) if window_h > 0 else 0.0
        out[name] = {
            "slope_per_hour": round(per_hour, 3),
            "allowed_per_hour": round(allowed, 3),
            "flat": per_hour <= allowed,
            "first": ys[0],
            "last": ys[-1],
            "min": min(ys),
            "max": max(ys),
        }
    return out


@dataclass
class Counts:
    """O(partitions) bookkeeping: the soak must not grow by itself."""

    partitions: int
    sent: int = 0
    acked: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    consumed: int = 0
    gaps: int = 0  # a sequence jumped forward (records skipped)
    repeats: int = 0  # a sequence at or below one already seen (duplicate/reorder)
    foreign: int = 0
    raised: dict[str, int] = field(default_factory=dict)
    next_seq: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.next_seq = [0] * self.partitions
        self.expected = [0] * self.partitions


async def produce(
    producer: Producer,
    topic: str,
    counts: Counts,
    rate: float,
    padding: bytes,
    running: asyncio.Event,
) -> None:
    def settled(handle: DeliveryFuture) -> None:
        error = handle.exception()
        if error is None:
            counts.acked += 1
        else:
            counts.failed += 1
            name = type(error).__name__
            counts.failures[name] = counts.failures.get(name, 0) + 1

    began = time.monotonic()
    while running.is_set():
        for _ in range(10):
            for p in range(counts.partitions):
                value = encode(p, counts.next_seq[p], padding)
                handle = await producer.send(topic, value, partition=p)
                counts.next_seq[p] += 1
                counts.sent += 1
                handle.add_done_callback(settled)
        # paced against the start, so that a slow round is made up for
        await asyncio.sleep(max(0.0, counts.sent / rate - (time.monotonic() - began)))


async def consume(consumer: Consumer, counts: Counts, running: asyncio.Event) -> None:
    last_commit = time.monotonic()
    while running.is_set():
        try:
            got = await consumer.getmany(timeout_ms=300)
        except KafkaError as exc:
            name = type(exc).__name__
            counts.raised[name] = counts.raised.get(name, 0) + 1
            await asyncio.sleep(0.5)
            continue
        for recs in got.values():
            for r in recs:
                decoded = decode(r.value or b"")
                if decoded is None or decoded[0] != r.partition:
                    counts.foreign += 1
                    continue
                p, seq = decoded
                want = counts.expected[p]
                if seq > want:
                    counts.gaps += seq - want
                elif seq < want:
                    counts.repeats += 1
                    continue
                counts.expected[p] = seq + 1
                counts.consumed += 1
        if got and time.monotonic() - last_commit >= 1.0:
            try:
                await consumer.commit()
            except KafkaError as exc:
                name = f"commit:{type(exc).__name__}"
                counts.raised[name] = counts.raised.get(name, 0) + 1
            last_commit = time.monotonic()


@contextlib.asynccontextmanager
async def kafka(bootstrap: str | None) -> AsyncIterator[str]:
    if bootstrap:
        yield bootstrap
        return
    async with LocalKafka(security=PLAINTEXT_ONLY) as local:
        yield local.bootstrap_servers


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    duration = args.minutes * 60
    warmup = args.warmup_seconds
    if warmup is None:
        warmup = min(120.0, max(15.0, duration * 0.1))
    async with kafka(args.bootstrap) as bootstrap:
        topic = f"soak-{uuid.uuid4().hex[:10]}"
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics(
                [NewTopic(topic, num_partitions=args.partitions, replication_factor=1)]
            )
        counts = Counts(args.partitions)
        samples: list[Sample] = []
        producing, consuming, sampling = asyncio.Event(), asyncio.Event(), asyncio.Event()
        producing.set()
        consuming.set()
        padding = b"s" * max(0, args.value_size - 10)
        async with (
            Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer,
            Consumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=f"soak-{topic}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            ) as consumer,
        ):
            began = time.monotonic()
            sender = asyncio.create_task(
                produce(producer, topic, counts, args.rate, padding, producing)
            )
            reader = asyncio.create_task(consume(consumer, counts, consuming))
            sampler = asyncio.create_task(
                sample_until(samples, args.sample_seconds, began, sampling)
            )
            next_report = began + 60
            while time.monotonic() - began < duration:
                for task in (sender, reader):
                    if task.done():
                        task.result()  # a crashed loop ends the soak with its error
                await asyncio.sleep(1)
                if time.monotonic() >= next_report and samples:
                    next_report += 60
                    last = samples[-1]
                    print(
                        f"[{last.t / 60:5.1f} min] sent {counts.sent} consumed "
                        f"{counts.consumed} rss {last.rss_mib:.1f} MiB fds {last.fds} "
                        f"tasks {last.tasks}",
                        flush=True,
                    )
            sampling.set()  # samples cover the steady state only
            await sampler
            producing.clear()
            await asyncio.wait_for(sender, 30)
            await producer.flush(timeout_ms=60_000)
            for _ in range(300):  # up to 60 s for the consumer to read the rest
                if counts.consumed >= counts.acked:
                    break
                await asyncio.sleep(0.2)
            consuming.clear()
            await asyncio.wait_for(reader, 30)
    verdict = judge(samples, warmup)
    flat = all(v.get("flat", False) for k, v in verdict.items() if k in LIMITS)
    data_ok = (
        counts.failed == counts.gaps == counts.repeats == counts.foreign == 0
        and not counts.raised
        and counts.consumed == counts.acked == counts.sent
    )
    return {
        "minutes": args.minutes,
        "rate": args.rate,
        "warmup_s": warmup,
        "counts": {k: v for k, v in asdict(counts).items() if k not in ("next_seq", "expected")},
        "trend": verdict,
        "flat": flat,
        "data_ok": data_ok,
        "samples": [asdict(s) for s in samples],
    }


async def sample_until(
    samples: list[Sample], every_s: float, began: float, stopped: asyncio.Event
) -> None:
    while not stopped.is_set():
        samples.append(take_sample(began))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), every_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--bootstrap", default=None, help="default: start a local Kafka")
    parser.add_argument("--rate", type=float, default=1000.0, help="records per second")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=None,
        help="samples before this are not fitted (default: 10%%, 15-120 s)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    result = asyncio.run(soak(args))
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["flat"] and result["data_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
