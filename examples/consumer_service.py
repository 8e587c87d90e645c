"""A small consumer service: ``async for`` processing, manual commits, graceful shutdown.

    .venv/bin/python examples/consumer_service.py

Starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a cluster),
creates an ``orders`` topic, produces a bounded batch of orders with aiokproto's
Producer, and runs the service: it consumes in a consumer group, totals the orders,
commits every 100 records and once more on the way out, and stops on SIGTERM/SIGINT
or when every order of this run was processed (so the example ends by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from typing import Any

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.producer import Producer
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

TOPIC = "orders"
ORDERS = 1_000
COMMIT_EVERY = 100
RUN_LIMIT_S = 60


async def produce_orders(bootstrap: str, run_id: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        if TOPIC not in await admin.list_topics():
            await admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
    async with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as producer:
        for i in range(ORDERS):
            order = {"run": run_id, "id": i, "amount_cents": 100 + i % 250}
            await producer.send(
                TOPIC,
                json.dumps(order).encode(),
                key=f"customer-{i % 17}".encode(),
                headers=[("source", b"example")],
            )
        await producer.flush()
    print(f"produced {ORDERS} orders for run {run_id}")


class OrderService:
    """Totals this run's orders; commits what it has processed."""

    def __init__(self, consumer: Consumer[bytes | None, Any], run_id: str) -> None:
        self.consumer = consumer
        self.run_id = run_id
        self.processed = 0
        self.total_cents = 0
        self.since_commit = 0

    def handle(self, record: ConsumerRecord[bytes | None, Any]) -> None:
        order = record.value  # already decoded by value_deserializer
        if order.get("run") != self.run_id:
            return  # an order from an earlier run of the example
        self.processed += 1
        self.total_cents += order["amount_cents"]

    async def run(self) -> None:
        async for record in self.consumer:
            self.handle(record)
            self.since_commit += 1
            if self.since_commit >= COMMIT_EVERY:
                await self.consumer.commit()  # positions of every record handed out so far
                self.since_commit = 0
            if self.processed >= ORDERS:
                return


async def serve(bootstrap: str) -> None:
    run_id = uuid.uuid4().hex[:8]
    await produce_orders(bootstrap, run_id)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    started = time.monotonic()
    async with Consumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id="order-service",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        value_deserializer=lambda v: json.loads(v) if v is not None else None,
    ) as consumer:
        service = OrderService(consumer, run_id)
        worker = asyncio.create_task(service.run(), name="order-service")
        stopper = asyncio.create_task(stop.wait(), name="stop-signal")
        try:
            await asyncio.wait(
                {worker, stopper}, timeout=RUN_LIMIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (worker, stopper):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if worker.done() and not worker.cancelled() and worker.exception() is not None:
            raise worker.exception()  # type: ignore[misc]
        why = "signal" if stop.is_set() else "done" if service.processed >= ORDERS else "time limit"
        await consumer.commit()  # graceful: what was processed is not processed again
        print(
            f"stopped ({why}) after {time.monotonic() - started:.1f} s: "
            f"{service.processed} orders, total {service.total_cents / 100:.2f}; "
            f"assignment was {sorted(consumer.assignment())}"
        )
    # leaving the block left the group and closed the connections


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(serve(external))
        return
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        print(f"started Kafka {kafka.version} at {kafka.bootstrap_servers}")
        asyncio.run(serve(kafka.bootstrap_servers))
    print("broker stopped")


if __name__ == "__main__":
    main()
