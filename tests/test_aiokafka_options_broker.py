"""Clients configured with every option aiokafka code passes, against the broker."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from aiokproto import Admin, Consumer, NewTopic, Producer, TopicPartition
from aiokproto.producer.partitioner import murmur2

aiokafka = pytest.importorskip("aiokafka")
from aiokafka.partitioner import DefaultPartitioner  # noqa: E402


class CountingPartitioner(DefaultPartitioner):  # type: ignore[misc]
    """aiokafka's default partitioner, counting its calls."""

    calls = 0

    def __call__(self, key: bytes | None, all_partitions: Any, available: Any) -> int:
        type(self).calls += 1
        return int(super().__call__(key, all_partitions, available))


async def test_an_aiokafka_configured_producer_and_consumer_work(
    kafka: Any, topic_name: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ignored options' warnings are tested elsewhere
        admin = Admin(bootstrap_servers=kafka.bootstrap_servers, api_version="auto")
        producer = Producer(
            bootstrap_servers=kafka.bootstrap_servers,
            client_id=None,
            api_version="auto",
            compression_type=None,
            max_batch_size=512,
            partitioner=CountingPartitioner(),
            connections_max_idle_ms=None,
            linger_ms=0,
            acks="all",
        )
        consumer = Consumer(
            topic_name,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"{topic_name}-g",
            max_poll_records=None,
            consumer_timeout_ms=200,
            api_version="auto",
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            partition_assignment_strategy=(
                aiokafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor,
            ),
        )
    async with admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)])
    keys = [b"k%d" % i for i in range(30)]
    async with producer:
        sent = [await producer.send_and_wait(topic_name, b"v", key=k) for k in keys]
    # aiokafka's partitioner chose every partition (where murmur2 puts keyed records)
    assert CountingPartitioner.calls == len(keys)
    for key, meta in zip(keys, sent, strict=True):
        assert meta.partition == (murmur2(key) & 0x7FFFFFFF) % 3
    got: dict[TopicPartition, int] = {}
    async with consumer:
        async with asyncio.timeout(30):
            while sum(got.values()) < len(keys):
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    got[tp] = got.get(tp, 0) + len(records)
    assert sum(got.values()) == len(keys)
