"""Cold start on many topics: the first send to each of N existing topics.

A service that fans out to many topics (one per tenant, per table, per device type)
meets every topic for the first time after a restart. Each client, in a fresh process
with its own defaults, sends one 100 B record to each of ``--topics`` topics of
``--partitions`` partitions (the topics exist and have settled: created once, before
any run), one after another as a handler would (``await send()`` per record for the
asyncio clients, ``produce()`` for librdkafka), then flushes. Reported per client
(median of ``--runs`` runs, clients interleaved): wall time until every record is
acknowledged (the client's import included, its modules byte-compiled first as pip
does at install), CPU seconds of the process, each as a ratio to librdkafka's, and for
aiokproto the Metadata requests and the topics they named (issue 33: it asked for
every topic seen so far at each new topic, 500 requests naming 125,000 topics; then
one request per topic, as each send() waited for its topic; now records wait for
their topic's metadata in a pending queue and one request asks for all of them).

    .venv/bin/python -m benchmarks.many_topics [--topics 500] [--partitions 10] [--runs 3]
        [--clients aiokproto,confluent-kafka,aiokafka] [--bootstrap-servers HOST:PORT]

Without ``--bootstrap-servers`` a single-node Kafka is started (``LocalKafka``).
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

from benchmarks.local_broker import (
    chosen_clients,
    client_arguments,
    compile_packages,
    on_broker,
    rotated,
    run_child,
)

CLIENTS = ("aiokproto", "confluent-kafka", "aiokafka")


async def _aiokproto(bootstrap: str, topics: list[str]) -> dict[str, Any]:
    from aiokproto import Producer

    asked: list[int] = []
    async with Producer(bootstrap_servers=bootstrap) as p:
        assert p._client is not None
        meta = p._client.metadata
        send = meta._send

        async def counting(request: Any) -> Any:
            asked.append(-1 if request.topics is None else len(request.topics))
            return await send(request)

        meta._send = counting
        futures = [await p.send(topic, b"x" * 100) for topic in topics]
        for future in futures:
            await future
    return {"metadata_requests": len(asked), "topics_named": sum(n for n in asked if n > 0)}


async def _aiokafka(bootstrap: str, topics: list[str]) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        futures = [await p.send(topic, b"x" * 100) for topic in topics]
        for future in futures:
            await future
    finally:
        await p.stop()
    return {}


def _confluent(bootstrap: str, topics: list[str]) -> dict[str, Any]:
    import confluent_kafka  # type: ignore[import-untyped]

    errors: list[Any] = []
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for topic in topics:
        p.produce(topic, b"x" * 100, on_delivery=lambda err, _m: err and errors.append(err))
        p.poll(0)
    if p.flush(120) or errors:
        raise RuntimeError(f"librdkafka did not deliver everything: {errors[:3]}")
    return {}


def child(client: str, bootstrap: str, topics: list[str]) -> dict[str, Any]:
    """One run in this (fresh) process."""
    wall, cpu = time.perf_counter(), time.process_time()
    if client == "confluent-kafka":
        extra = _confluent(bootstrap, topics)
    elif client == "aiokafka":
        extra = asyncio.run(_aiokafka(bootstrap, topics))
    else:
        extra = asyncio.run(_aiokproto(bootstrap, topics))
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, **extra}


def _run_child(client: str, bootstrap: str, topics: list[str]) -> dict[str, Any]:
    argv = ["--bootstrap-servers", bootstrap]
    return run_child("benchmarks.many_topics", client, argv, stdin=json.dumps(topics))


async def _create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from aiokproto import Admin, NewTopic, Producer

    async with Admin(bootstrap_servers=bootstrap) as admin:
        for i in range(0, len(names), 100):
            await admin.create_topics(
                [NewTopic(n, num_partitions=partitions, replication_factor=1)
                 for n in names[i:i + 100]]
            )
    # leaders settle before any measured run: a record to each partition
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        futures = [await p.send(n, b"warm", partition=i)
                   for n in names for i in range(partitions)]
        for future in futures:
            await future


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=10)
    client_arguments(ap, CLIENTS, runs=3)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.bootstrap_servers, json.load(sys.stdin))))
        return 0
    clients = chosen_clients(ap, args.clients, CLIENTS)
    compile_packages("aiokproto", "aiokafka", "confluent_kafka")  # as installed wheels are

    def session(bootstrap: str) -> None:
        run = uuid.uuid4().hex[:6]
        names = [f"cold-{run}-{i}" for i in range(args.topics)]
        started = time.perf_counter()
        asyncio.run(_create_topics(bootstrap, names, args.partitions))
        print(f"{args.topics} topics x {args.partitions} partitions created and settled in "
              f"{time.perf_counter() - started:.1f} s; load average "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for i in range(args.runs):
            for client in rotated(clients, i):
                runs[client].append(_run_child(client, bootstrap, names))
        print(f"first send to each of {args.topics} topics ({args.partitions} partitions "
              f"each), each client's defaults, median of {args.runs} runs, load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"  {'client':16s} {'wall s':>8s} {'CPU s':>8s} {'wall/rdk':>9s} {'CPU/rdk':>8s}"
              f" {'Metadata requests':>18s} {'topics named':>13s}")
        medians = {
            c: (statistics.median(r["wall_s"] for r in runs[c]),
                statistics.median(r["cpu_s"] for r in runs[c]))
            for c in clients
        }
        base = medians.get("confluent-kafka")
        for client in clients:
            rs = runs[client]
            wall, cpu = medians[client]
            ratios = (f"{wall / base[0]:>8.2f}x {cpu / base[1]:>7.2f}x" if base
                      else f"{'':>9s} {'':>8s}")
            reqs = statistics.median(r.get("metadata_requests", -1) for r in rs)
            named = statistics.median(r.get("topics_named", -1) for r in rs)
            shown = (f"{reqs:>18,.0f} {named:>13,.0f}" if reqs >= 0 else f"{'':>18s} {'':>13s}")
            print(f"  {client:16s} {wall:>8.2f} {cpu:>8.2f} {ratios} {shown}")

    on_broker(args.bootstrap_servers, session)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
