"""Consumer memory when behind on many partitions: peak RSS of a slow reader.

A consumer restarted behind on every partition of a wide topic fetches ahead of its
application. Each client, in a fresh process with its own defaults, is assigned every
partition of one topic (``--partitions`` partitions, ``--per-partition`` bytes of 1 KB
records in each, written once before any run) from the beginning, then reads slowly
(``--take`` records every ``--every-ms`` ms, as a handler that is the bottleneck
would) for ``--seconds`` seconds. Reported per client (median of ``--runs`` runs,
clients interleaved): the process's peak RSS above its RSS just before the consumer
was created (``VmHWM`` - ``VmRSS``, from /proc/self/status), the records read, and for
aiokproto the most fetched data its own accounting ever held (``fetch-buffer-bytes``).
``aiokproto-unbounded`` is aiokproto with ``fetch_buffer_max_bytes`` at 1 TiB: the
per-partition bounds alone (two answers of ``max_partition_fetch_bytes`` each), as
before the consumer-wide bound (issue 33: up to ~2 GB for 1,000 partitions);
``aiokproto-8mib`` sets it to 8 MiB, showing what is the bound and what the baseline.

    .venv/bin/python -m benchmarks.consumer_memory [--partitions 1000]
        [--per-partition 262144] [--seconds 8] [--runs 1]
        [--clients aiokproto,aiokproto-8mib,aiokproto-unbounded,confluent-kafka,aiokafka]
        [--bootstrap-servers HOST:PORT]

Without ``--bootstrap-servers`` a single-node Kafka is started (``LocalKafka``).
Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any

from benchmarks.local_broker import chosen_clients, client_arguments, on_broker, rotated, run_child

CLIENTS = ("aiokproto", "aiokproto-8mib", "aiokproto-unbounded", "confluent-kafka", "aiokafka")
#: fetch_buffer_max_bytes per aiokproto variant (None: the default, 64 MiB)
BOUNDS = {"aiokproto": None, "aiokproto-8mib": 8 << 20, "aiokproto-unbounded": 1 << 40}
VALUE = 1024


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _aiokproto(args: dict[str, Any], bound: int | None) -> dict[str, Any]:
    from aiokproto import Consumer, TopicPartition

    options: dict[str, Any] = {} if bound is None else {"fetch_buffer_max_bytes": bound}
    async with Consumer(
        bootstrap_servers=args["bootstrap"], auto_offset_reset="earliest", **options
    ) as c:
        c.assign([TopicPartition(args["topic"], p) for p in range(args["partitions"])])
        read = 0
        end = time.monotonic() + args["seconds"]
        while time.monotonic() < end:
            got = await c.getmany(timeout_ms=args["every_ms"], max_records=args["take"])
            read += sum(len(v) for v in got.values())
            await asyncio.sleep(args["every_ms"] / 1000)
        return {"read": read, "buffer_peak": c._fetcher.budget.peak}


async def _aiokafka(args: dict[str, Any]) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    c = AIOKafkaConsumer(
        bootstrap_servers=args["bootstrap"],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await c.start()
    try:
        c.assign([TopicPartition(args["topic"], p) for p in range(args["partitions"])])
        read = 0
        end = time.monotonic() + args["seconds"]
        while time.monotonic() < end:
            got = await c.getmany(timeout_ms=args["every_ms"], max_records=args["take"])
            read += sum(len(v) for v in got.values())
            await asyncio.sleep(args["every_ms"] / 1000)
    finally:
        await c.stop()
    return {"read": read}


def _confluent(args: dict[str, Any]) -> dict[str, Any]:
    import confluent_kafka  # type: ignore[import-untyped]

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": args["bootstrap"],
            "group.id": f"mem-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign(
            [
                confluent_kafka.TopicPartition(args["topic"], p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(args["partitions"])
            ]
        )
        read = 0
        end = time.monotonic() + args["seconds"]
        while time.monotonic() < end:
            msgs = c.consume(args["take"], args["every_ms"] / 1000)
            read += sum(1 for m in msgs if m.error() is None)
            time.sleep(args["every_ms"] / 1000)
    finally:
        c.close()
    return {"read": read}


def child(client: str, args: dict[str, Any]) -> dict[str, Any]:
    """One run in this (fresh) process."""
    # the client library is imported before the baseline: its code is not the buffer
    if client == "confluent-kafka":
        import confluent_kafka  # type: ignore[import-untyped]  # noqa: F401
    elif client == "aiokafka":
        import aiokafka  # type: ignore[import-untyped]  # noqa: F401
    else:
        import aiokproto  # noqa: F401
    base_kb = _status_kb("VmRSS")
    if client == "confluent-kafka":
        extra = _confluent(args)
    elif client == "aiokafka":
        extra = asyncio.run(_aiokafka(args))
    else:
        extra = asyncio.run(_aiokproto(args, BOUNDS[client]))
    peak_kb = _status_kb("VmHWM")
    return {"base_mb": base_kb / 1024, "peak_mb": peak_kb / 1024, **extra}


def _run_child(client: str, args: dict[str, Any]) -> dict[str, Any]:
    return run_child("benchmarks.consumer_memory", client, stdin=json.dumps(args))


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    import confluent_kafka  # type: ignore[import-untyped]

    from aiokproto import Admin, NewTopic

    async def create() -> None:
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, partitions, 1)])

    asyncio.run(create())
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
    )
    value = b"v" * VALUE
    for _ in range(per_partition // VALUE):
        for partition in range(partitions):
            while True:
                try:
                    p.produce(topic, value, partition=partition)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
    if p.flush(300):
        raise RuntimeError("the topic could not be filled")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--per-partition", type=int, default=256 * 1024)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--take", type=int, default=500)
    ap.add_argument("--every-ms", type=int, default=100)
    client_arguments(ap, CLIENTS, runs=1)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, json.load(sys.stdin))))
        return 0
    clients = chosen_clients(ap, args.clients, CLIENTS)

    def session(bootstrap: str) -> None:
        topic = f"behind-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        _fill(bootstrap, topic, args.partitions, args.per_partition)
        total_mb = args.partitions * (args.per_partition // VALUE) * VALUE / 2**20
        print(
            f"{args.partitions} partitions x {args.per_partition // 1024} KB "
            f"({total_mb:.0f} MB) written in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        spec = {
            "bootstrap": bootstrap,
            "topic": topic,
            "partitions": args.partitions,
            "seconds": args.seconds,
            "take": args.take,
            "every_ms": args.every_ms,
        }
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for i in range(args.runs):
            for client in rotated(clients, i):
                runs[client].append(_run_child(client, spec))
        print(
            f"a consumer behind on {args.partitions} partitions ({total_mb:.0f} MB), reading "
            f"{args.take} records every {args.every_ms} ms for {args.seconds:g} s, each "
            f"client's defaults, median of {args.runs} run(s), load average "
            f"{os.getloadavg()[0]:.1f}"
        )
        print(
            f"  {'client':20s} {'peak RSS - base MB':>19s} {'base MB':>8s} {'records':>8s}"
            f" {'own buffer peak MB':>19s}"
        )
        for client in clients:
            rs = runs[client]
            grown = statistics.median(r["peak_mb"] - r["base_mb"] for r in rs)
            base = statistics.median(r["base_mb"] for r in rs)
            read = statistics.median(r["read"] for r in rs)
            own = [r["buffer_peak"] / 2**20 for r in rs if "buffer_peak" in r]
            shown = f"{statistics.median(own):>19.1f}" if own else f"{'':>19s}"
            print(f"  {client:20s} {grown:>19.1f} {base:>8.1f} {read:>8,.0f} {shown}")

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
