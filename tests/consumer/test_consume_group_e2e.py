"""One end-to-end group run through the Consumer API (the group itself is tested in
tests/consumer/group and test_group*.py)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiokproto.consumer import Consumer, ConsumerRecord
from aiokproto.structs import TopicPartition
from tests.consumer.conftest import aproduce, create_topic


async def take(consumer: Consumer, n: int, seconds: float = 60) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + seconds
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n}"
        for recs in (await consumer.getmany(timeout_ms=300, max_records=n - len(out))).values():
            out.extend(recs)
    return out


async def test_group_commit_and_resume(kafka: Any, topic_name: str) -> None:
    await create_topic(kafka.bootstrap_servers, topic_name, partitions=2)
    records = [(i % 2, None, f"v{i}".encode(), None) for i in range(40)]
    await aproduce(kafka.bootstrap_servers, topic_name, records)
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = dict(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
    )
    async with Consumer(topic_name, **options) as first:
        got = await take(first, 25)
        assert first.assignment() == {TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)}
        await first.commit()
        committed = {tp: await first.committed(tp) for tp in first.assignment()}
        assert sum(c or 0 for c in committed.values()) == 25
    async with Consumer(topic_name, **options) as second:
        rest = await take(second, 15)
        assert await second.getmany(timeout_ms=500) == {}
    values = sorted(r.value for r in got + rest)
    assert values == sorted(f"v{i}".encode() for i in range(40))


async def test_manual_assignment_with_group_commits(kafka: Any, topic_name: str) -> None:
    await aproduce(kafka.bootstrap_servers, topic_name, [(0, None, b"x", None)] * 5)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, group_id=group, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        assert await consumer.committed(tp) is None
        await take(consumer, 3)
        await consumer.commit({tp: 3})
        assert await consumer.committed(tp) == 3
    async with Consumer(
        bootstrap_servers=kafka.bootstrap_servers, group_id=group, auto_offset_reset="none"
    ) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 3
