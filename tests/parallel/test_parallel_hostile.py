"""``ParallelConsumer`` under a hostile user, against a real broker: the consumer's
position moved back under it (``seek()`` from a handler)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from aiokproto import ParallelConsumer
from aiokproto.structs import TopicPartition
from tests.parallel.test_parallel_broker import Record, committed, fill, group_id, member


async def test_seek_back_from_a_handler_replays_from_there(kafka: Any, topic_name: str) -> None:
    await fill(kafka, topic_name, 1, 200, 10)
    tp = TopicPartition(topic_name, 0)
    seen: dict[bytes | None, list[int]] = defaultdict(list)
    handled: list[int] = []
    async with member(kafka, topic_name, group_id()) as consumer:
        async with ParallelConsumer(consumer, max_concurrency=5) as pc:
            sought = False

            async def handle(record: Record) -> None:
                nonlocal sought
                seen[record.key].append(record.offset)
                await asyncio.sleep(0.001)
                handled.append(record.offset)
                if record.offset == 100 and not sought:
                    sought = True
                    consumer.seek(tp, 20)  # replay from 20 (its records are fetched again)
                if handled.count(199) == 2:
                    await pc.stop()

            await asyncio.wait_for(pc.run(handle), 30)
        assert sought
        assert set(handled) == set(range(200))  # nothing skipped
        assert handled.count(50) == 2  # replayed
        assert await committed(consumer, topic_name, 1) == [200]
