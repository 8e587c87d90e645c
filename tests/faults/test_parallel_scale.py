"""``ParallelConsumer`` at the issue's scale (issue 36): every key's records handled
one at a time in offset order, each exactly once, all committed at the end; 100,000
records of 1,000 keys in ``make faults``, a 10,000-record slice in ``make test``. Its
behaviour under SIGKILLed members and coordinator bounces is the ``parallel-*``
variants of ``test_group_churn.py``."""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Any

from aiokproto import ParallelConsumer, Producer
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import create_topic
from tests.parallel.test_parallel_broker import Record, committed, group_id, member

if TYPE_CHECKING:
    from tests.faults.conftest import FaultScale


async def test_key_order_holds_over_many_records_and_keys(
    kafka: Any, topic_name: str, fault_scale: FaultScale
) -> None:
    """Full: 100,000 records of 1,000 keys on 12 partitions, random latencies, 500 at
    once; the slice: 10,000 records of 200 keys."""
    count, keys = fault_scale.pick(10_000, 100_000), fault_scale.pick(200, 1_000)
    partitions = 12
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=partitions)
    async with Producer(
        bootstrap_servers=kafka.bootstrap_servers, linger_ms=20, batch_size=262_144
    ) as producer:
        for i in range(count):
            await producer.send(topic_name, value=b"%d" % i, key=b"k%d" % (i % keys))
        await producer.flush()
    rnd = random.Random(100)
    last: dict[tuple[int, bytes | None], int] = {}
    busy: set[tuple[int, bytes | None]] = set()
    handled = 0
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(consumer, ordering="key", max_concurrency=500) as pc:

            async def handle(record: Record) -> None:
                nonlocal handled
                lane = (record.partition, record.key)
                assert lane not in busy, f"key {lane} twice at once"
                assert last.get(lane, -1) < record.offset, f"key {lane} out of order"
                busy.add(lane)
                try:
                    await asyncio.sleep(rnd.random() * 0.005)
                finally:
                    busy.discard(lane)
                last[lane] = record.offset
                handled += 1
                if handled == count:
                    await pc.stop()

            started = time.monotonic()
            await asyncio.wait_for(pc.run(handle), 300)
            elapsed = time.monotonic() - started
        assert handled == count and pc.processed == count and len(last) == keys
        tps = [TopicPartition(topic_name, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        assert sum(ends.values()) == count
        assert await committed(consumer, topic_name, partitions) == [ends[tp] for tp in tps]
    print(f"{count} records in {elapsed:.1f} s, peak concurrency {pc.in_flight_max}")
