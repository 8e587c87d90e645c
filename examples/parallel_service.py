"""A service that calls a slow API per record, many records at once, each customer's
orders still one after the other: ``ParallelConsumer`` with ``ordering="key"``.

    .venv/bin/python examples/parallel_service.py

The demo starts a local single-node Kafka (unless KAFKA_BOOTSTRAP_SERVERS names a
cluster), produces orders for 500 customers (the key) to a new 6-partition
``orders-...`` topic, and runs the service until every order is settled (a real
service runs until SIGTERM or Ctrl-C: both stop it cleanly, committing what finished).

The "billing API" takes 5 to 30 ms per call; every 40th call fails once (a transient
error: retried after a back-off) and some orders are refused for good (dead-lettered to
``orders-....DLT`` with headers saying why). At the end the demo checks that each
customer's orders were billed in order, none twice, that the refused ones are in the
dead-letter topic, and that the group's committed offsets cover every order, then
prints the rate next to what sequential ``async for`` would reach.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
import uuid
from collections import defaultdict

from aiokproto import Consumer, ConsumerRecord, ParallelConsumer, Producer, TopicPartition
from aiokproto.admin import Admin, NewTopic
from aiokproto.testing import PLAINTEXT_ONLY, LocalKafka

ORDERS = 4_000
CUSTOMERS = 500
PARTITIONS = 6


class BillingRefused(Exception):
    """The API refuses this order for good: no retry helps."""


class Billing:
    """A stand-in for an HTTP API: slow, sometimes flaky, sometimes refusing."""

    def __init__(self) -> None:
        self.calls = 0
        self.billed: dict[bytes, list[int]] = defaultdict(list)  # customer -> order numbers
        self.in_flight = 0
        self.peak = 0

    async def bill(self, customer: bytes, order: int) -> None:
        self.calls += 1
        call = self.calls
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(random.uniform(0.005, 0.030))
            if order % 997 == 13:
                raise BillingRefused(f"order {order}: card expired")
            if call % 40 == 0:
                raise ConnectionError("billing API: connection reset")  # transient
            self.billed[customer].append(order)
        finally:
            self.in_flight -= 1


async def demo(bootstrap: str) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    dlt = f"{topic}.DLT"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1), NewTopic(dlt, 1, 1)])
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for order in range(ORDERS):
            customer = b"customer-%d" % (order % CUSTOMERS)
            await producer.send(topic, b"%d" % order, key=customer)
        await producer.flush()

    billing = Billing()
    refused = {o for o in range(ORDERS) if o % 997 == 13}

    async with (
        Producer(bootstrap_servers=bootstrap) as dead_letters,
        Consumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"billing-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer,
        ParallelConsumer(
            consumer,
            ordering="key",  # a customer's orders never overlap, and go in order
            max_concurrency=200,
            retries=3,
            retry_backoff_ms=20,
            on_failure="dead_letter",
            dead_letter_producer=dead_letters,
            dead_letter_topic=dlt,
        ) as pc,
    ):

        async def handle(record: ConsumerRecord[bytes, bytes]) -> None:
            await billing.bill(record.key, int(record.value))

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):  # a service stops on these
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(pc.stop()))
        started = time.monotonic()
        watchdog = asyncio.create_task(asyncio.sleep(120))
        runner = asyncio.create_task(pc.run(handle))
        while not runner.done() and not watchdog.done():
            settled = sum(map(len, billing.billed.values())) + pc.dead_lettered
            if settled == ORDERS:
                await pc.stop()
            await asyncio.wait({runner, watchdog}, timeout=0.1)
        watchdog.cancel()
        await runner
        elapsed = time.monotonic() - started
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = {tp: await consumer.committed(tp) for tp in tps}

    billed = [o for orders in billing.billed.values() for o in orders]
    assert all(orders == sorted(orders) for orders in billing.billed.values()), "order broken"
    assert len(billed) == len(set(billed)), "an order was billed twice"
    missing = set(range(ORDERS)) - set(billed) - refused
    assert not missing, f"orders never settled: {sorted(missing)[:20]} ({len(missing)})"
    assert committed == ends, (committed, ends)
    async with Consumer(dlt, bootstrap_servers=bootstrap, auto_offset_reset="earliest") as dead:
        got = [await asyncio.wait_for(dead.getone(), 10) for _ in refused]
    assert {int(r.value) for r in got} == refused
    why = dict(got[0].headers)
    print(f"dead-lettered: {sorted(refused)} ({why['aiokproto.dlt.message'].decode()})")
    sequential = 1 / 0.0175  # one consumer, one call at a time (mean 17.5 ms)
    print(
        f"billed {len(billed)} orders of {CUSTOMERS} customers in {elapsed:.1f} s: "
        f"{len(billed) / elapsed:,.0f} orders/s with up to {billing.peak} calls at once "
        f"(sequential async for: about {sequential:,.0f}/s); retried {pc.retried} calls"
    )


def main() -> None:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        asyncio.run(demo(external))
        return
    with LocalKafka(security=PLAINTEXT_ONLY) as kafka:
        asyncio.run(demo(kafka.bootstrap_servers))


if __name__ == "__main__":
    main()
