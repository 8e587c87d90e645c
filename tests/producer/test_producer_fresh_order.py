"""Per-partition order of a producer without idempotence while its connection to the
leader opens: batches dispatched before the connection is open wait for it, and a
batch dispatched just after it opened must not be written before them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokproto.producer import Producer
from tests.producer.helpers import FAST, consume, create_topic

RECORDS = 300
RUNS = 4


@pytest.mark.parametrize("acks", [0, 1])
async def test_batches_queued_while_the_connection_opens_keep_their_order(
    kafka: Any, topic_name: str, acks: int
) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, RUNS)
    # every partition has its leader first: acks=0 records sent to a partition before
    # that are lost (the broker closes the connection), and this test is about order
    async with Producer(bootstrap_servers=kafka.bootstrap_servers, **FAST) as warm:
        await asyncio.gather(*[await warm.send(topic_name, b"", partition=run)
                               for run in range(RUNS)])
    for run in range(RUNS):  # a fresh producer, so a fresh produce connection, each time
        async with Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            acks=acks,
            enable_idempotence=False,
            linger_ms=0,
            batch_size=200,  # about one record per batch: many requests
            max_in_flight_requests_per_connection=5,
            **FAST,
        ) as p:
            futures = []
            for i in range(RECORDS):
                futures.append(await p.send(topic_name, f"{i:05d}".encode(), partition=run))
                if i % 3 == 0:
                    await asyncio.sleep(0)  # the sender runs between sends
            await asyncio.gather(*futures)
    # acks=0 resolves a record once written to the socket, so a run's last requests
    # may reach the broker after the next run's first: one partition per run (read
    # back by librdkafka; the warm-up records are the empty ones)
    read = consume(kafka.bootstrap_servers, topic_name, RUNS * (RECORDS + 1), RUNS)
    values: dict[int, list[bytes]] = {run: [] for run in range(RUNS)}
    for msg in read:
        if msg.value():
            values[msg.partition()].append(msg.value())
    assert sum(map(len, values.values())) == RUNS * RECORDS, [len(v) for v in values.values()]
    for run, got in values.items():
        assert got == sorted(got), (run, b" ".join(got[:40]).decode())
