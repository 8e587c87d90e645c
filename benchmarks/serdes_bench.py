"""Schema-registry Avro serdes end to end: serialize+send and receive+deserialize of a
10-field record, aiokproto's ``AvroSerializer``/``AvroDeserializer`` on the producer and
consumer hooks beside confluent-kafka's serdes on its Producer/Consumer, same broker,
same registry (the tests' local Apicurio, started here).

Per side and client: records per second (wall) and CPU per record (this process, all
threads: librdkafka's included), the median of ``--runs`` interleaved runs.

    .venv/bin/python -m benchmarks.serdes_bench [-n 50000] [--runs 3]
        [--bootstrap-servers HOST:PORT] [--registry-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Reading",
        "namespace": "bench",
        "fields": [
            {"name": f"f{i}", "type": t}
            for i, t in enumerate(["int", "long", "double", "string", "boolean"] * 2)
        ],
    }
)
RECORD = {f"f{i}": v for i, v in enumerate([7, 2**40, 1.5, "sensor-0042", True] * 2)}


def _measure(fn: Callable[[], None], n: int) -> tuple[float, float]:
    """(records/s, CPU µs/record) of ``fn`` handling ``n`` records."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu / n * 1e6


def ours_produce(bootstrap: str, url: str, topic: str, n: int) -> None:
    from aiokproto import Producer
    from aiokproto.schema_registry import AvroSerializer, SchemaRegistryClient

    async def run() -> None:
        async with SchemaRegistryClient({"url": url}) as sr:
            ser = AvroSerializer(sr, SCHEMA)
            async with Producer(
                bootstrap_servers=bootstrap, linger_ms=5, value_serializer=ser
            ) as p:
                for _ in range(n):
                    await p.send(topic, RECORD)
                await p.flush()

    asyncio.run(run())


def ours_consume(bootstrap: str, url: str, topic: str, n: int) -> None:
    from aiokproto import Consumer
    from aiokproto.schema_registry import AvroDeserializer, SchemaRegistryClient

    async def run() -> None:
        async with SchemaRegistryClient({"url": url}) as sr:
            async with Consumer(
                topic,
                bootstrap_servers=bootstrap,
                auto_offset_reset="earliest",
                value_deserializer=AvroDeserializer(sr),
            ) as c:
                got = 0
                while got < n:
                    batch = await c.getmany(timeout_ms=1000)
                    for records in batch.values():
                        got += len(records)
                        assert records[-1].value["f3"] == "sensor-0042"

    asyncio.run(run())


def theirs_produce(bootstrap: str, url: str, topic: str, n: int) -> None:
    import confluent_kafka as ck
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer

    ser = AvroSerializer(SchemaRegistryClient({"url": url}), SCHEMA)
    ctx = ck.serialization.SerializationContext(topic, ck.serialization.MessageField.VALUE)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(n):
        value = ser(RECORD, ctx)
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush()


def theirs_consume(bootstrap: str, url: str, topic: str, n: int) -> None:
    import confluent_kafka as ck
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    de = AvroDeserializer(SchemaRegistryClient({"url": url}))
    ctx = ck.serialization.SerializationContext(topic, ck.serialization.MessageField.VALUE)
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    try:
        while got < n:
            for msg in c.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    value = de(msg.value(), ctx)
                    got += 1
        assert value["f3"] == "sensor-0042"
    finally:
        c.close()


CLIENTS: dict[str, tuple[Any, Any]] = {
    "aiokproto": (ours_produce, ours_consume),
    "confluent-kafka": (theirs_produce, theirs_consume),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--registry-url", default=None)
    args = parser.parse_args(argv)
    from contextlib import ExitStack

    from aiokproto.testing.schema_registry import LocalSchemaRegistry
    from benchmarks.local_broker import local_broker

    with ExitStack() as stack:
        bootstrap = args.bootstrap_servers or stack.enter_context(local_broker())
        url = args.registry_url or stack.enter_context(LocalSchemaRegistry()).url
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for name, (produce, consume) in CLIENTS.items():  # imports and JIT-free warm-up
            topic = f"bench-serdes-warm-{name}-{uuid.uuid4().hex[:8]}"
            produce(bootstrap, url, topic, 1000)
            consume(bootstrap, url, topic, 1000)
        for _ in range(args.runs):
            for name, sides in CLIENTS.items():
                topic = f"bench-serdes-{name}-{uuid.uuid4().hex[:8]}"
                for side, fn in zip(("produce", "consume"), sides, strict=True):
                    run = functools.partial(fn, bootstrap, url, topic, args.n)
                    results.setdefault((name, side), []).append(_measure(run, args.n))
    print(f"Avro, 10 fields, {args.n} records, median of {args.runs} runs")
    print(f"{'client':<16} {'side':<8} {'records/s':>10} {'CPU us/record':>14}")
    for (name, side), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rate = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:<16} {side:<8} {rate:>10.0f} {cpu:>14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
