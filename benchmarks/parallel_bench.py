"""``ParallelConsumer`` throughput against sequential ``async for`` (issue 36).

One topic of 12 partitions holds records with 10,000 distinct keys; the handler sleeps
20 ms (an I/O call). Each case is one consumer in a fresh group reading from the
beginning:

* ``sequential``: ``async for record in consumer: await handle(record)``;
* ``key`` / ``partition`` / ``unordered`` at ``max_concurrency`` 50, 200 and 1,000:
  ``ParallelConsumer(consumer, ordering=..., max_concurrency=...)``.

A case is timed from its first handled record for ``--seconds``; it reports records/s,
the ceiling the concurrency allows (``max_concurrency`` / latency, or partitions /
latency for ``partition``, 1 / latency for ``sequential``) and the process CPU time per
record (user + system of this process, broker excluded). The process is one asyncio
loop: past some concurrency the loop's CPU, not the latency, bounds the rate.

The handler's own cost is measured apart, in the same run: as many coroutines as the
case has handlers in flight, each looping ``await asyncio.sleep(latency)`` with no
Kafka at all (``sleeps alone @ N``). Its CPU per sleep is the handler's timer and task
machinery: a case's CPU per record minus it is the client's (fetch, decode, scheduling,
commits). Its sleeps/s is what the machine allowed the handler alone at the time: on a
busy machine the loop gets a slice of a core and every timer fires late, so the
records/s drop, the sleeps alone's too, while the CPU per record barely moves. The share
of a core the process used and the 1-minute load average are reported with each case.

    .venv/bin/python -m benchmarks.parallel_bench [--seconds 5] [--records 200000]
        [--concurrency 50,200,1000] [--orderings key,partition,unordered]
        [--bootstrap-servers HOST:PORT]

Without ``--bootstrap-servers`` a single-node Kafka 4.3.1 is started
(``aiokproto.testing.LocalKafka``). The Markdown table goes to stdout, the results as
JSON to ``benchmarks/results/parallel-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiokproto import Admin, Consumer, ParallelConsumer, Producer
from aiokproto.admin import NewTopic
from benchmarks.local_broker import on_broker

RESULTS_DIR = Path(__file__).parent / "results"
KAFKA_VERSION = "4.3.1"
PARTITIONS = 12
KEYS = 10_000
LATENCY_S = 0.020
ORDERINGS = ("key", "partition", "unordered")
CONCURRENCY = (50, 200, 1_000)


@dataclass(frozen=True)
class Case:
    ordering: str  # "sequential" or a ParallelConsumer ordering
    concurrency: int  # 1 for sequential

    @property
    def name(self) -> str:
        if self.ordering == "sequential":
            return "sequential async for"
        return f"{self.ordering} @ {self.concurrency}"

    def in_flight(self, partitions: int) -> int:
        """Handlers running at once when records keep coming."""
        if self.ordering == "partition":
            return min(self.concurrency, partitions)
        return self.concurrency

    def ceiling(self, latency_s: float, partitions: int) -> float:
        """Records/s the concurrency allows when only the latency bounds it."""
        if self.ordering == "sequential":
            return 1 / latency_s
        if self.ordering == "partition":
            return min(self.concurrency, partitions) / latency_s
        return self.concurrency / latency_s


@dataclass(frozen=True)
class Result:
    case: str
    records: int
    seconds: float
    cpu_s: float
    ceiling: float
    #: CPU µs per sleep of the handler's sleeps alone at the same concurrency
    sleep_cpu_us: float | None = None
    #: sleeps/s of the handler's sleeps alone at the same concurrency: what the
    #: machine allowed at that time with no Kafka at all
    sleep_rate: float | None = None
    #: the 1-minute load average when the case ended
    load: float | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6 if self.records else 0.0

    @property
    def core_share(self) -> float:
        """CPU seconds per second: 1.0 is a whole core (the loop never waited)."""
        return self.cpu_s / self.seconds if self.seconds else 0.0

    @property
    def client_cpu_us(self) -> float | None:
        """CPU µs per record besides the handler's sleeps."""
        if self.sleep_cpu_us is None:
            return None
        return self.cpu_us_per_record - self.sleep_cpu_us


def cases(orderings: list[str], concurrency: list[int]) -> list[Case]:
    out = [Case("sequential", 1)]
    out += [Case(o, c) for o in orderings for c in concurrency]
    return out


def parse_list(text: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or (allowed is not None and any(t not in allowed for t in items)):
        raise ValueError(f"a comma-separated subset of {allowed}" if allowed else "empty list")
    return items


def render_table(results: list[Result]) -> str:
    lines = [
        "| case | records/s | ceiling (concurrency / latency) | of ceiling "
        "| sleeps alone /s | CPU µs/record | of which the handler's sleeps "
        "| of which the client | core used | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for r in results:
        share = r.rate / r.ceiling if r.ceiling else 0.0
        lines.append(
            f"| {r.case} | {r.rate:,.0f} | {r.ceiling:,.0f} | {share:.0%} | "
            f"{num(r.sleep_rate, ',.0f')} | {r.cpu_us_per_record:,.1f} | "
            f"{num(r.sleep_cpu_us, ',.1f')} | "
            f"{num(r.client_cpu_us, ',.1f')} | {r.core_share:.0%} | {num(r.load, '.1f')} |"
        )
    return "\n".join(lines)


async def sleeps_alone(concurrency: int, seconds: float, latency_s: float) -> tuple[float, float]:
    """CPU µs per ``asyncio.sleep(latency_s)`` and sleeps/s, with ``concurrency``
    coroutines looping on it (and counting, as the benchmark's handler does): the
    handler's own cost, and the rate the machine allows it now."""
    count = 0
    stop = False

    async def sleeper() -> None:
        nonlocal count
        while not stop:
            await asyncio.sleep(latency_s)
            count += 1

    tasks = [asyncio.create_task(sleeper()) for _ in range(concurrency)]
    await asyncio.sleep(latency_s * 5)  # (started and spread out)
    start_count, start_cpu, start = count, time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    done, cpu = count - start_count, time.process_time() - start_cpu
    elapsed = time.monotonic() - start
    stop = True
    await asyncio.gather(*tasks)
    return (cpu / done * 1e6 if done else 0.0), done / elapsed


async def fill(bootstrap: str, topic: str, records: int) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
        )
    async with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262_144) as producer:
        value = b"x" * 100
        for i in range(records):
            await producer.send(topic, value, key=b"key-%d" % (i % KEYS))
        await producer.flush()


async def run_case(
    bootstrap: str, topic: str, case: Case, seconds: float, latency_s: float
) -> Result:
    count = 0
    first: float | None = None
    done = asyncio.Event()

    async def handle(record: Any) -> None:
        nonlocal count, first
        await asyncio.sleep(latency_s)
        if first is None:
            first = time.monotonic()
            cpu_start.append(time.process_time())
        count += 1
        if time.monotonic() - first >= seconds:
            done.set()

    cpu_start: list[float] = []
    consumer = Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bench-parallel-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=1_000,
    )
    async with consumer:
        if case.ordering == "sequential":
            async for record in consumer:
                await handle(record)
                if done.is_set():
                    break
        else:
            async with ParallelConsumer(
                consumer,
                ordering=case.ordering,  # type: ignore[arg-type]
                max_concurrency=case.concurrency,
                fetch_max_records=1_000,
            ) as pc:
                runner = asyncio.create_task(pc.run(handle))
                await done.wait()
                # measured here: the stop's drain is not part of the steady state
                measured, cpu_end, end = count, time.process_time(), time.monotonic()
                await pc.stop()
                await runner
                assert first is not None
                return Result(
                    case.name,
                    measured,
                    end - first,
                    cpu_end - cpu_start[0],
                    case.ceiling(latency_s, PARTITIONS),
                )
        assert first is not None
        return Result(
            case.name,
            count,
            time.monotonic() - first,
            time.process_time() - cpu_start[0],
            case.ceiling(latency_s, PARTITIONS),
        )


async def session(
    bootstrap: str, records: int, todo: list[Case], seconds: float, latency_s: float
) -> list[Result]:
    topic = f"bench-parallel-{uuid.uuid4().hex[:8]}"
    print(f"producing {records:,} records to {topic}...", file=sys.stderr, flush=True)
    await fill(bootstrap, topic, records)
    sleeps: dict[int, tuple[float, float]] = {}
    for n in sorted({case.in_flight(PARTITIONS) for case in todo}):
        sleeps[n] = await sleeps_alone(n, min(seconds, 3.0), latency_s)
        print(
            f"sleeps alone @ {n}: {sleeps[n][1]:,.0f}/s, {sleeps[n][0]:,.1f} µs CPU/sleep",
            file=sys.stderr,
            flush=True,
        )
    results = []
    for case in todo:
        result = await run_case(bootstrap, topic, case, seconds, latency_s)
        cpu, rate = sleeps[case.in_flight(PARTITIONS)]
        result = dataclasses.replace(
            result, sleep_cpu_us=cpu, sleep_rate=rate, load=os.getloadavg()[0]
        )
        print(
            f"{result.case}: {result.rate:,.0f} records/s, "
            f"{result.cpu_us_per_record:,.1f} µs CPU/record "
            f"({result.client_cpu_us:,.1f} besides the handler's sleeps), "
            f"load {result.load:.1f}",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    return results


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.parallel_bench",
        description="ParallelConsumer vs sequential async for",
    )
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per case (5)")
    ap.add_argument("--records", type=int, default=400_000, help="records in the topic")
    ap.add_argument("--latency-ms", type=float, default=LATENCY_S * 1000, help="handler sleep")
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    ap.add_argument("--orderings", default=",".join(ORDERINGS))
    ap.add_argument("--bootstrap-servers", default=None, help="use this cluster")
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    try:
        orderings = parse_list(args.orderings, ORDERINGS)
        concurrency = [int(c) for c in parse_list(args.concurrency)]
    except ValueError as exc:
        ap.error(str(exc))
    if any(c < 1 for c in concurrency) or args.seconds <= 0 or args.records < 1:
        ap.error("--concurrency, --seconds and --records must be positive")
    todo = cases(orderings, concurrency)
    latency_s = args.latency_ms / 1000
    need = max(c.ceiling(latency_s, PARTITIONS) for c in todo) * args.seconds * 1.5
    if args.records < need:
        print(
            f"note: fewer records than the fastest case could take ({need:,.0f})", file=sys.stderr
        )
    results = on_broker(
        args.bootstrap_servers,
        lambda bootstrap: asyncio.run(
            session(bootstrap, args.records, todo, args.seconds, latency_s)
        ),
        version=KAFKA_VERSION,
    )
    print(render_table(results))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"parallel-{stamp}.json"
    path.write_text(
        json.dumps(
            {
                "latency_ms": args.latency_ms,
                "partitions": PARTITIONS,
                "keys": KEYS,
                "results": [
                    {
                        **asdict(r),
                        "rate": r.rate,
                        "cpu_us_per_record": r.cpu_us_per_record,
                        "client_cpu_us": r.client_cpu_us,
                        "core_share": r.core_share,
                    }
                    for r in results
                ],
            },
            indent=2,
        )
    )
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
