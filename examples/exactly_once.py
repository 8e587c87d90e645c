"""Exactly-once consume-transform-produce: read ``payments``, write ``payments-fees``,
each input's output and its consumer offset committed in one transaction.

    .venv/bin/python examples/exactly_once.py            # demo: produce, process, verify
    .venv/bin/python examples/exactly_once.py serve --input T --output U \\
        --group G --transactional-id X                   # only the service

The demo starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a
cluster), produces a bounded batch of payments, runs the service until every payment of
this run has its fee record, and checks with a read_committed consumer that each
payment has exactly one. The service stops cleanly on SIGTERM/SIGINT: an open
transaction is aborted, so nothing half-done is ever visible. Killed with SIGKILL, its
open transaction is aborted by the next instance with the same transactional id
(fenced), and the group's committed offsets say where to go on: nothing is lost,
nothing is written twice. Each input partition's output goes to the output partition
with the same number (the output topic needs at least as many partitions); run more
instances with distinct transactional ids to share the work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import uuid

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.errors import KafkaError, ProducerFencedError
from aiokproto.producer import Producer
from aiokproto.structs import TopicPartition
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

INPUT, OUTPUT = "payments", "payments-fees"
PAYMENTS = 2_000
PARTITIONS = 3


def transform(record: ConsumerRecord) -> bytes:
    """The business logic: a fee record for a payment."""
    assert record.value is not None  # every payment has a value
    payment = json.loads(record.value)
    fee = {**payment, "fee_cents": max(1, payment["amount_cents"] * 29 // 1000)}
    return json.dumps(fee, sort_keys=True).encode()


async def process(
    bootstrap: str,
    source: str,
    sink: str,
    group: str,
    transactional_id: str,
    batch: int,
    stop: asyncio.Event,
    idle_exit_s: float | None = None,
) -> int:
    """Run until ``stop`` is set (or nothing arrived for ``idle_exit_s``); returns how
    many inputs were committed by this run."""
    committed = 0
    last_input = time.monotonic()
    async with (
        Consumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,  # offsets are committed by the transactions
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as consumer,
        Producer(bootstrap_servers=bootstrap, transactional_id=transactional_id) as producer,
    ):
        while not stop.is_set():
            records = await consumer.getmany(timeout_ms=500, max_records=batch)
            if not records:
                if not consumer.assignment():
                    last_input = time.monotonic()  # still joining: not idle yet
                elif idle_exit_s is not None and time.monotonic() - last_input > idle_exit_s:
                    break
                continue
            last_input = time.monotonic()
            try:
                async with producer.transaction():
                    for tp, recs in records.items():
                        for r in recs:
                            value = transform(r)
                            await producer.send(sink, value, key=r.key, partition=tp.partition)
                    await producer.send_offsets_to_transaction(
                        {tp: recs[-1].offset + 1 for tp, recs in records.items()},
                        consumer.group_metadata(),
                    )
            except ProducerFencedError:
                raise  # another instance with this transactional id took over
            except KafkaError as exc:
                # aborted (e.g. the group moved these partitions away): consume them
                # again from where this transaction began, as far as they are still ours
                print(f"transaction aborted ({type(exc).__name__}: {exc}); rewinding")
                owned = consumer.assignment()
                for tp, recs in records.items():
                    if tp in owned:
                        consumer.seek(tp, recs[0].offset)
                continue
            committed += sum(len(recs) for recs in records.values())
    return committed


async def produce_payments(bootstrap: str, run_id: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        existing = await admin.list_topics()
        await admin.create_topics(
            [
                NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)
                for name in (INPUT, OUTPUT)
                if name not in existing
            ]
        )
    async with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(PAYMENTS):
            payment = {"run": run_id, "id": i, "amount_cents": 500 + i % 9_000}
            await producer.send(INPUT, json.dumps(payment).encode(), key=b"acct-%d" % (i % 50))
    print(f"produced {PAYMENTS} payments for run {run_id}")


async def verify(bootstrap: str, run_id: str) -> None:
    """Every payment of this run has exactly one fee record (read_committed)."""
    seen: dict[int, int] = {}
    async with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as c:
        tps = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)  # the last stable offsets: all is decided
        while [tp for tp in tps if await c.position(tp) < ends[tp]]:
            for recs in (await c.getmany(timeout_ms=1000)).values():
                for r in recs:
                    assert r.value is not None  # transform() wrote every fee
                    fee = json.loads(r.value)
                    if fee["run"] == run_id:
                        seen[fee["id"]] = seen.get(fee["id"], 0) + 1
    missing = PAYMENTS - len(seen)
    twice = sum(1 for n in seen.values() if n > 1)
    if missing or twice:
        raise SystemExit(f"NOT exactly once: {missing} missing, {twice} written twice")
    print(f"exactly once: {PAYMENTS} payments, {len(seen)} fee records, none twice")


async def demo(bootstrap: str) -> None:
    run_id = uuid.uuid4().hex[:8]
    await produce_payments(bootstrap, run_id)
    stop = asyncio.Event()
    _on_signals(stop)
    done = await process(
        bootstrap, INPUT, OUTPUT, "fee-service", "fee-service-0", 500, stop, idle_exit_s=3.0
    )
    print(f"the service committed {done} inputs")
    await verify(bootstrap, run_id)


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    _on_signals(stop)
    done = await process(
        args.bootstrap,
        args.input,
        args.output,
        args.group,
        args.transactional_id,
        args.batch,
        stop,
        args.idle_exit_s,
    )
    print(f"stopped: committed {done} inputs", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    s = sub.add_parser("serve", help="run only the service")
    s.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    s.add_argument("--input", default=INPUT)
    s.add_argument("--output", default=OUTPUT)
    s.add_argument("--group", default="fee-service")
    s.add_argument("--transactional-id", default="fee-service-0")
    s.add_argument("--batch", type=int, default=500, help="records per transaction at most")
    s.add_argument("--idle-exit-s", type=float, default=None)
    args = parser.parse_args()
    if args.command == "serve":
        if not args.bootstrap:
            sys.exit("serve needs --bootstrap or KAFKA_BOOTSTRAP_SERVERS")
        asyncio.run(serve(args))
        return
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(demo(external))
        return
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        asyncio.run(demo(kafka.bootstrap_servers))
    print("broker stopped")


if __name__ == "__main__":
    main()
