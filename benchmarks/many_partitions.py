"""Many partitions: CPU per record as keyed records spread over 1 vs 1,000 partitions.

A service that produces keyed records (one key per user, device, order) spreads them
over every partition of its topic, and its loop hands control back to the event loop
every few sends (as a request handler does). At 1,000 partitions each partition sees a
record only now and then, so batches hold a record or two and what each batch costs the
client dominates (issue 33: aiokproto's CPU per record grew 12x from 1 to 1,000
partitions, librdkafka's 1.95x).

Each client, in a fresh process with its own defaults, sends ``--records`` records of
100 B with keys drawn from 10,000, yielding every 10 sends (``await asyncio.sleep(0)``
for the asyncio clients, ``poll(0)`` for librdkafka), then flushes. A warm-up record to
every partition runs first, outside the measurement (leaders known, connections open).
Reported per client and partition count (median of ``--runs`` runs, clients interleaved):
CPU seconds of the process per million records (all threads), wall time, and the growth
from the first partition count to the last.

    .venv/bin/python -m benchmarks.many_partitions [--partitions 1,1000] [--records 100000]
        [--runs 3] [--clients aiokproto,confluent-kafka,aiokafka] [--bootstrap-servers H:P]

``--clients`` may name ``aiokproto-base`` too: aiokproto from ``$BENCH_AIOKPROTO_BASE``
(a revision extracted and built by ``python -m benchmarks.build_base REV DIR``).

Without ``--bootstrap-servers`` a single-node Kafka is started (``LocalKafka``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks.local_broker import chosen_clients, client_arguments, on_broker, rotated, run_child

CLIENTS = ("aiokproto", "confluent-kafka", "aiokafka")
#: another checkout's aiokproto ($BENCH_AIOKPROTO_BASE: make bench-base's build_base)
BASE_CLIENT = "aiokproto-base"
VALUE = b"x" * 100
KEYS = [b"key-%d" % i for i in range(10_000)]
YIELD_EVERY = 10


def keys_for(n: int) -> list[bytes]:
    """The key of each of ``n`` records: the 10,000 keys in turn, so every partition
    gets records in every stretch of the run."""
    return [KEYS[i % len(KEYS)] for i in range(n)]


async def _aiokproto(bootstrap: str, topic: str, parts: int, n: int) -> tuple[float, float]:
    from aiokproto import Producer

    async with Producer(bootstrap_servers=bootstrap) as p:
        warm = [await p.send(topic, b"warm", partition=i) for i in range(parts)]
        for future in warm:
            await future
        keys = keys_for(n)
        wall, cpu = time.perf_counter(), time.process_time()
        send = p.send
        for i in range(n):
            await send(topic, VALUE, key=keys[i])
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        await p.flush()
        return time.perf_counter() - wall, time.process_time() - cpu


async def _aiokafka(bootstrap: str, topic: str, parts: int, n: int) -> tuple[float, float]:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        warm = [await p.send(topic, b"warm", partition=i) for i in range(parts)]
        for future in warm:
            await future
        keys = keys_for(n)
        wall, cpu = time.perf_counter(), time.process_time()
        send = p.send
        for i in range(n):
            await send(topic, VALUE, key=keys[i])
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        await p.flush()
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await p.stop()


def _confluent(bootstrap: str, topic: str, parts: int, n: int) -> tuple[float, float]:
    import confluent_kafka  # type: ignore[import-untyped]

    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(parts):
        p.produce(topic, b"warm", partition=i, on_delivery=report)
    if p.flush(60) or errors:
        raise RuntimeError(f"librdkafka's warm-up did not deliver: {errors[:3]}")
    keys = keys_for(n)
    wall, cpu = time.perf_counter(), time.process_time()
    produce, poll = p.produce, p.poll
    for i in range(n):
        while True:
            try:
                produce(topic, VALUE, key=keys[i], on_delivery=report)
                break
            except BufferError:  # its queue is full: serve callbacks, as a service does
                poll(0.01)
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            poll(0)
    if p.flush(300) or errors:
        raise RuntimeError(f"librdkafka did not deliver everything: {errors[:3]}")
    return time.perf_counter() - wall, time.process_time() - cpu


def child(client: str, bootstrap: str, topic: str, parts: int, n: int) -> dict[str, Any]:
    """One run in this (fresh) process."""
    if client == BASE_CLIENT:
        base = os.environ.get("BENCH_AIOKPROTO_BASE", "")
        if not os.path.isdir(os.path.join(base, "aiokproto")) or "aiokproto" in sys.modules:
            raise RuntimeError(f"BENCH_AIOKPROTO_BASE={base!r} is not a checkout of aiokproto")
        sys.path.insert(0, base)
    if client == "confluent-kafka":
        wall, cpu = _confluent(bootstrap, topic, parts, n)
    elif client == "aiokafka":
        wall, cpu = asyncio.run(_aiokafka(bootstrap, topic, parts, n))
    else:
        wall, cpu = asyncio.run(_aiokproto(bootstrap, topic, parts, n))
    return {"wall_s": wall, "cpu_s": cpu, "records": n}


def _run_child(client: str, bootstrap: str, topic: str, parts: int, n: int) -> dict[str, Any]:
    argv = ["--bootstrap-servers", bootstrap, "--topic", topic, "--partitions", str(parts),
            "--records", str(n)]  # fmt: skip
    return run_child("benchmarks.many_partitions", client, argv, timeout=900)


async def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from aiokproto import Admin, NewTopic, Producer

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    # leaders settle before any measured run: a record to each partition
    async with Producer(bootstrap_servers=bootstrap) as p:
        futures = [await p.send(name, b"warm", partition=i) for i in range(partitions)]
        for future in futures:
            await future


async def _delete_topics(bootstrap: str, names: list[str]) -> None:
    from aiokproto import Admin

    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.delete_topics(names)


def cpu_per_million(runs: Sequence[dict[str, Any]]) -> float:
    """Median CPU seconds per million records over the runs."""
    return statistics.median(r["cpu_s"] / r["records"] * 1e6 for r in runs)


def summary(
    results: dict[str, dict[int, list[dict[str, Any]]]], counts: Sequence[int]
) -> list[str]:
    """The table's lines: per client, CPU s per million records and wall s at each
    partition count, and the growth from the first count to the last."""
    head = "  ".join(f"{f'p{c} CPU s/M':>12s} {f'p{c} wall s':>10s}" for c in counts)
    lines = [f"  {'client':16s} {head} {'growth':>7s}"]
    for client, by_count in results.items():
        cells, per_m = [], []
        for c in counts:
            runs = by_count.get(c, [])
            if not runs:
                cells.append(f"{'-':>12s} {'-':>10s}")
                per_m.append(math.nan)
                continue
            per_m.append(cpu_per_million(runs))
            wall = statistics.median(r["wall_s"] for r in runs)
            cells.append(f"{per_m[-1]:>12.1f} {wall:>10.2f}")
        growth = per_m[-1] / per_m[0] if per_m and per_m[0] > 0 else math.nan
        lines.append(f"  {client:16s} {'  '.join(cells)} {growth:>6.2f}x")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", default="1,1000", help="comma-separated partition counts")
    ap.add_argument("--records", type=int, default=100_000)
    client_arguments(ap, CLIENTS, runs=3, child=(BASE_CLIENT,))
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        parts = int(args.partitions)
        result = child(args.child, args.bootstrap_servers, args.topic, parts, args.records)
        print(json.dumps(result))
        return 0
    try:
        counts = [int(c) for c in args.partitions.split(",") if c]
    except ValueError:
        ap.error(f"--partitions takes comma-separated counts, not {args.partitions!r}")
    if not counts or min(counts) < 1 or args.records < 1 or args.runs < 1:
        ap.error("partition counts, --records and --runs must be >= 1")
    clients = chosen_clients(ap, args.clients, CLIENTS, also=(BASE_CLIENT,))

    def session(bootstrap: str) -> None:
        run = uuid.uuid4().hex[:6]
        topics = {c: f"many-parts-{run}-{c}" for c in counts}
        try:
            for c, name in topics.items():
                asyncio.run(_create_topic(bootstrap, name, c))
            measure(bootstrap, topics)
        finally:  # 1,000 partitions hold ~3,000 files open in the broker
            asyncio.run(_delete_topics(bootstrap, list(topics.values())))

    def measure(bootstrap: str, topics: dict[int, str]) -> None:
        results: dict[str, dict[int, list[dict[str, Any]]]] = {
            client: {c: [] for c in counts} for client in clients
        }
        for i in range(args.runs):
            for c in counts:
                for client in rotated(clients, i):
                    results[client][c].append(
                        _run_child(client, bootstrap, topics[c], c, args.records)
                    )
        print(f"{args.records:,} keyed 100 B records, a yield every {YIELD_EVERY} sends, each "
              f"client's defaults, median of {args.runs} runs, load average "
              f"{os.getloadavg()[0]:.1f}")
        for line in summary(results, counts):
            print(line)

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
