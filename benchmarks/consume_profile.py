"""Quick consumer side-by-side: aiokproto vs aiokafka vs confluent-kafka (and a profile).

Fills a one-partition topic with N records of 100 B (librdkafka producer, no
compression), then times each client consuming all N from offset 0 without a group:
from the first fetch until the N-th record is in the application's hands. Clients
keep their defaults apart from starting at the earliest offset. ``-iter`` variants use
``async for`` (one record per step), the others ``getmany``/``consume`` in batches.
With ``--profile`` the aiokproto loop runs under cProfile.

    .venv/bin/python -m benchmarks.consume_profile [-n 500000] [--runs 3] [--profile]
        [--codec none] [--batch-size 65536] [--bootstrap-servers HOST:PORT]
        [--clients aiokproto,aiokproto-iter,aiokafka,aiokafka-iter,confluent]

A broker is started (and stopped) unless ``--bootstrap-servers`` or
``$KAFKA_BOOTSTRAP_SERVERS`` names one.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from benchmarks.local_broker import on_broker

VALUE = b"x" * 100


def fill(bootstrap: str, n: int, codec: str, batch_size: int) -> str:
    import confluent_kafka as ck

    from aiokproto.admin import Admin, NewTopic

    topic = f"bench-consume-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])

    asyncio.run(create())
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "compression.type": codec,
            "batch.size": batch_size,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return topic


async def run_aiokproto(bootstrap: str, topic: str, n: int) -> float:
    from aiokproto.consumer import Consumer
    from aiokproto.structs import TopicPartition

    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        began = time.perf_counter()
        count = 0
        getmany = consumer.getmany
        while count < n:
            for records in (await getmany(timeout_ms=1000)).values():
                count += len(records)
        return time.perf_counter() - began


async def run_aiokproto_iter(bootstrap: str, topic: str, n: int) -> float:
    from aiokproto.consumer import Consumer
    from aiokproto.structs import TopicPartition

    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        began = time.perf_counter()
        count = 0
        async for _record in consumer:
            count += 1
            if count >= n:
                break
        return time.perf_counter() - began


async def run_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        began = time.perf_counter()
        count = 0
        while count < n:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                count += len(records)
        return time.perf_counter() - began
    finally:
        await consumer.stop()


async def run_aiokafka_iter(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        began = time.perf_counter()
        count = 0
        async for _record in consumer:
            count += 1
            if count >= n:
                break
        return time.perf_counter() - began
    finally:
        await consumer.stop()


def run_confluent(bootstrap: str, topic: str, n: int) -> float:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # librdkafka's 1 s default paused its prefetch mid-run (see the bench's
            # confluent_sync.consumer_config): measured at its best
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        began = time.perf_counter()
        count = 0
        while count < n:
            ask = min(10_000, n - count)  # consume() waits for all it asks for
            for msg in consumer.consume(num_messages=ask, timeout=1.0):
                if msg.error() is None:
                    count += 1
        return time.perf_counter() - began
    finally:
        consumer.close()


ASYNC_CLIENTS: dict[str, Callable[[str, str, int], Coroutine[Any, Any, float]]] = {
    "aiokproto": run_aiokproto,
    "aiokproto-iter": run_aiokproto_iter,
    "aiokafka": run_aiokafka,
    "aiokafka-iter": run_aiokafka_iter,
}


def measure(client: str, bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    """(records per wall-clock second, records per CPU second of this process)."""
    cpu = time.process_time()
    if client == "confluent":
        seconds = run_confluent(bootstrap, topic, n)
    else:
        seconds = asyncio.run(ASYNC_CLIENTS[client](bootstrap, topic, n))
    cpu = time.process_time() - cpu
    return n / seconds, n / cpu


def profile(bootstrap: str, topic: str, n: int, client: str) -> None:
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(ASYNC_CLIENTS[client](bootstrap, topic, n))
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500_000, help="records in the topic")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--codec", default="none", help="compression of the filled topic")
    ap.add_argument(
        "--batch-size", type=int, default=1_000_000,
        help="producer batch.size when filling (make bench fills with 65536)",
    )
    ap.add_argument(
        "--clients", default="aiokproto,aiokproto-iter,aiokafka,aiokafka-iter,confluent"
    )
    ap.add_argument("--profile", action="store_true", help="cProfile the aiokproto loop")
    ap.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]

    # imports outside the timed (and CPU-counted) part
    import aiokafka  # noqa: F401
    import confluent_kafka  # noqa: F401

    import aiokproto.consumer  # noqa: F401

    def session(bootstrap: str) -> None:
        topic = fill(bootstrap, args.n, args.codec, args.batch_size)
        if args.profile:
            profile(bootstrap, topic, args.n, "aiokproto")
            profile(bootstrap, topic, args.n, "aiokproto-iter")
            return
        rates: dict[str, list[tuple[float, float]]] = {c: [] for c in clients}
        for _ in range(args.runs):
            for client in clients:  # interleaved, so drift hits every client alike
                rates[client].append(measure(client, bootstrap, topic, args.n))
        print(
            f"{args.n} records x 100 B ({args.codec}), 1 partition, from offset 0, "
            f"median of {args.runs} runs"
        )
        print(f"  {'client':16s} {'records/s':>12s} {'per CPU s':>12s}   runs (wall)")
        medians: dict[str, float] = {}
        for client in clients:
            wall = statistics.median(r[0] for r in rates[client])
            cpu = statistics.median(r[1] for r in rates[client])
            medians[client] = wall
            runs = ", ".join(f"{r[0]:,.0f}" for r in rates[client])
            print(f"  {client:16s} {wall:>12,.0f} {cpu:>12,.0f}   ({runs})")
        for ours, theirs in (
            ("aiokproto", "aiokafka"),
            ("aiokproto-iter", "aiokafka-iter"),
            ("aiokproto", "confluent"),
        ):
            if ours in medians and theirs in medians:
                print(f"  {ours} / {theirs}: {medians[ours] / medians[theirs]:.2f}x")

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
