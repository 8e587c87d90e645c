"""What ``aiokproto.otel`` costs: produce (and consume) N small records with and
without the instrumentor.

Modes, interleaved run by run so drift hits each alike:

- ``off``: not instrumented (the methods are the originals: the baseline),
- ``noop``: instrumented with the API's no-op tracer provider (no SDK installed: the
  wrappers' own cost, non-recording spans, W3C context still injected),
- ``sdk``: instrumented with the SDK, every span sampled, a ``BatchSpanProcessor``
  feeding an exporter that drops the spans (the SDK's cost without any export I/O),
- ``sdk-unsampled``: the SDK with a sampler that records nothing (``ALWAYS_OFF``).

Producing: ``await producer.send()`` per record (100 B, acks=1, one partition, a fresh
topic per run) until every record is acknowledged. Consuming (``--consume``): the same
records read back with ``async for`` (one receive span per record when instrumented).

    .venv/bin/python -m benchmarks.otel_overhead [-n 200000] [--runs 3] [--consume]
        [--modes off,noop,sdk,sdk-unsampled] [--bootstrap-servers HOST:PORT]

A broker is started (and stopped) unless ``--bootstrap-servers`` or
``$KAFKA_BOOTSTRAP_SERVERS`` names one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.local_broker import on_broker

VALUE = b"x" * 100


class _DropExporter:
    """A span exporter that drops everything (the SDK's cost, no I/O)."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _instrument(mode: str) -> Callable[[], None]:
    """Instrument for ``mode``; returns the undo."""
    if mode == "off":
        return lambda: None
    from opentelemetry import trace
    from opentelemetry.metrics import NoOpMeterProvider

    from aiokproto.otel import AiokprotoInstrumentor

    provider: Any
    if mode == "noop":
        provider = trace.NoOpTracerProvider()
    else:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

        provider = TracerProvider(sampler=ALWAYS_OFF if mode == "sdk-unsampled" else ALWAYS_ON)
        provider.add_span_processor(BatchSpanProcessor(_DropExporter()))  # type: ignore[arg-type]
    instrumentor = AiokprotoInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=NoOpMeterProvider())

    def undo() -> None:
        instrumentor.uninstrument()
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            shutdown()

    return undo


async def _topic(bootstrap: str) -> str:
    from aiokproto.admin import Admin, NewTopic

    name = f"otel-bench-{uuid.uuid4().hex[:10]}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    return name


async def _produce(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    from aiokproto import Producer

    async with Producer(bootstrap_servers=bootstrap, acks=1) as producer:
        await producer.partitions_for(topic)
        send = producer.send
        wall, cpu = time.perf_counter(), time.process_time()
        last = None
        for _ in range(n):
            last = await send(topic, VALUE)
        await producer.flush()
        assert last is not None and (await last).offset == n - 1
        return time.perf_counter() - wall, time.process_time() - cpu


async def _consume(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    from aiokproto import Consumer, TopicPartition

    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        wall, cpu = time.perf_counter(), time.process_time()
        seen = 0
        async for _record in consumer:
            seen += 1
            if seen == n:
                break
        return time.perf_counter() - wall, time.process_time() - cpu


def run(mode: str, bootstrap: str, n: int, consume: bool) -> dict[str, tuple[float, float]]:
    """records/s (wall) and records per CPU second, producing and consuming."""
    topic = asyncio.run(_topic(bootstrap))
    undo = _instrument(mode)
    try:
        out = {"produce": asyncio.run(_produce(bootstrap, topic, n))}
        if consume:
            out["consume"] = asyncio.run(_consume(bootstrap, topic, n))
    finally:
        undo()
    return {k: (n / wall, n / cpu) for k, (wall, cpu) in out.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000, help="records per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="off,noop,sdk,sdk-unsampled")
    ap.add_argument("--consume", action="store_true", help="also read the records back")
    ap.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]

    def session(bootstrap: str) -> None:
        run("off", bootstrap, min(args.n, 20_000), args.consume)  # warm-up: broker, page cache
        results: dict[str, list[dict[str, tuple[float, float]]]] = {m: [] for m in modes}
        for _ in range(args.runs):
            for mode in modes:
                results[mode].append(run(mode, bootstrap, args.n, args.consume))
        print(f"{args.n} records x 100 B, acks=1, 1 partition, median of {args.runs} runs")
        for phase in ("produce", "consume") if args.consume else ("produce",):
            base = statistics.median(r[phase][0] for r in results[modes[0]])
            print(f"{phase}:")
            print(
                f"  {'mode':14s} {'records/s':>11s} {'vs ' + modes[0]:>9s} {'per CPU s':>11s}"
                f"  {'us/record':>9s}   runs (records/s)"
            )
            for mode in modes:
                wall = statistics.median(r[phase][0] for r in results[mode])
                cpu = statistics.median(r[phase][1] for r in results[mode])
                runs = ", ".join(f"{r[phase][0]:,.0f}" for r in results[mode])
                print(
                    f"  {mode:14s} {wall:>11,.0f} {wall / base:>8.0%} {cpu:>11,.0f}"
                    f"  {1e6 / wall:>9.2f}   ({runs})"
                )

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
