"""On the 3-node cluster: the consumer keeps going when its partition's leader dies."""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokproto import Admin, NewTopic, TopicPartition
from aiokproto.consumer import Consumer
from aiokproto.testing import LocalKafka
from tests.consumer.conftest import ck

pytestmark = pytest.mark.cluster


def produce_some(bootstrap: str, topic: str, start: int, n: int) -> None:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    )
    for i in range(start, start + n):
        producer.produce(topic, value=str(i).encode(), partition=0)
    assert producer.flush(60) == 0


async def test_consumer_survives_leader_kill(kafka_cluster: LocalKafka, topic_name: str) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    async with Admin(bootstrap_servers=bootstrap, request_timeout_ms=5000) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=3)])
    await asyncio.to_thread(produce_some, bootstrap, topic_name, 0, 200)
    async with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        request_timeout_ms=5000,
        max_poll_records=20,
    ) as consumer:
        consumer.assign([tp])
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while len(seen) < 100:
            assert time.monotonic() < deadline
            for recs in (await consumer.getmany(timeout_ms=200)).values():
                seen.extend(int(r.value) for r in recs)
        leader = consumer._client.metadata.snapshot.leader_for(topic_name, 0)
        assert leader is not None
        await asyncio.to_thread(kafka_cluster.kill_node, leader)
        await asyncio.to_thread(produce_some, bootstrap, topic_name, 200, 100)
        deadline = time.monotonic() + 90
        while len(seen) < 300:
            assert time.monotonic() < deadline, f"stuck at {len(seen)} records"
            for recs in (await consumer.getmany(timeout_ms=200)).values():
                seen.extend(int(r.value) for r in recs)
        assert consumer._client.metadata.snapshot.leader_for(topic_name, 0) != leader
    assert seen == list(range(300))
