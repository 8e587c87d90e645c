"""Quick producer side-by-side: aiokproto vs aiokafka vs confluent-kafka (and a profile).

Produces N records of 100 B (acks=1, one partition, a fresh topic per run) to a local
broker and prints records/s from the first send until every record is acknowledged.
Each client keeps its own defaults apart from acks. With ``--profile`` the aiokproto
send loop runs under cProfile and the top functions are printed.

    .venv/bin/python -m benchmarks.produce_profile [-n 300000] [--runs 3] [--profile]
        [--bootstrap-servers HOST:PORT] [--clients aiokproto,aiokproto-batch,aiokafka,confluent]

A broker is started (and stopped) unless ``--bootstrap-servers`` or
``$KAFKA_BOOTSTRAP_SERVERS`` names one. The full harness is ``python -m benchmarks``.
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
#: --batch-size: given to every client (None: each keeps its own default)
BATCH: dict[str, int] = {}


async def _topic(bootstrap: str) -> str:
    from aiokproto.admin import Admin, NewTopic

    name = f"bench-{uuid.uuid4().hex[:10]}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    return name


async def run_aiokproto(bootstrap: str, topic: str, n: int) -> float:
    from aiokproto.producer import Producer

    async with Producer(bootstrap_servers=bootstrap, acks=1, **BATCH) as producer:
        await producer.partitions_for(topic)
        send = producer.send
        began = time.perf_counter()
        last = None
        for _ in range(n):
            last = await send(topic, VALUE)
        await producer.flush()
        assert last is not None and (await last).offset == n - 1
        return time.perf_counter() - began


async def run_aiokproto_batch(bootstrap: str, topic: str, n: int) -> float:
    from aiokproto.producer import Producer

    async with Producer(bootstrap_servers=bootstrap, acks=1, **BATCH) as producer:
        await producer.partitions_for(topic)
        values = [VALUE] * 10_000
        began = time.perf_counter()
        deliveries = []
        for _ in range(n // len(values)):
            deliveries.append(await producer.send_batch(topic, values, partition=0))
        await producer.flush()
        for delivery in deliveries:
            assert delivery.done()
        return time.perf_counter() - began


async def run_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    extra = {"max_batch_size": BATCH["batch_size"]} if BATCH else {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, **extra)
    await producer.start()
    try:
        await producer.partitions_for(topic)
        began = time.perf_counter()
        last = None
        for _ in range(n):
            last = await producer.send(topic, VALUE)
        await producer.flush()
        assert last is not None and (await last).offset == n - 1
        return time.perf_counter() - began
    finally:
        await producer.stop()


def run_confluent(bootstrap: str, topic: str, n: int) -> float:
    import confluent_kafka

    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": 1}
    if BATCH:
        conf["batch.size"] = BATCH["batch_size"]
    producer = confluent_kafka.Producer(conf)
    producer.list_topics(topic, timeout=10)
    failed = 0

    def report(err: object, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    began = time.perf_counter()
    produce, poll = producer.produce, producer.poll
    for _ in range(n):
        try:
            produce(topic, VALUE, on_delivery=report)
        except BufferError:
            poll(0.01)
            produce(topic, VALUE, on_delivery=report)
    assert producer.flush(60) == 0 and failed == 0
    return time.perf_counter() - began


ASYNC_CLIENTS: dict[str, Callable[[str, str, int], Coroutine[Any, Any, float]]] = {
    "aiokproto": run_aiokproto,
    "aiokproto-batch": run_aiokproto_batch,
    "aiokafka": run_aiokafka,
}


def measure(client: str, bootstrap: str, n: int) -> tuple[float, float]:
    """(records per wall-clock second, records per CPU second of this process).

    CPU time counts every thread of the process (librdkafka's too) and is what a busy,
    shared machine distorts least."""
    topic = asyncio.run(_topic(bootstrap))
    cpu = time.process_time()
    if client == "confluent":
        seconds = run_confluent(bootstrap, topic, n)
    else:
        seconds = asyncio.run(ASYNC_CLIENTS[client](bootstrap, topic, n))
    cpu = time.process_time() - cpu
    return n / seconds, n / cpu


def profile(bootstrap: str, n: int) -> None:
    topic = asyncio.run(_topic(bootstrap))
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run_aiokproto(bootstrap, topic, n))
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300_000, help="records per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", default="aiokproto,aiokproto-batch,aiokafka,confluent")
    ap.add_argument("--profile", action="store_true", help="cProfile the aiokproto loop")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="batch size for every client (default: each client's own)")
    ap.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    if args.batch_size:
        BATCH["batch_size"] = args.batch_size

    def session(bootstrap: str) -> None:
        if args.profile:
            profile(bootstrap, args.n)
            return
        rates: dict[str, list[tuple[float, float]]] = {c: [] for c in clients}
        for _ in range(args.runs):
            for client in clients:  # interleaved, so drift hits every client alike
                rates[client].append(measure(client, bootstrap, args.n))
        batch = f"batch size {args.batch_size}" if args.batch_size else "default batch sizes"
        print(f"{args.n} records x 100 B, acks=1, 1 partition, {batch}, "
              f"median of {args.runs} runs")
        print(f"  {'client':16s} {'records/s':>12s} {'per CPU s':>12s}   runs (wall)")
        for client in clients:
            wall = statistics.median(r[0] for r in rates[client])
            cpu = statistics.median(r[1] for r in rates[client])
            runs = ", ".join(f"{r[0]:,.0f}" for r in rates[client])
            print(f"  {client:16s} {wall:>12,.0f} {cpu:>12,.0f}   ({runs})")

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
