"""aiokafka's assignor classes in a real group, next to an aiokafka member using them."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer
from aiokproto.structs import TopicPartition

aiokafka = pytest.importorskip("aiokafka")

ASSIGNORS = {
    "roundrobin": "aiokafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor",
    "range": "aiokafka.coordinator.assignors.range.RangePartitionAssignor",
    "sticky": "aiokafka.coordinator.assignors.sticky.sticky_assignor.StickyPartitionAssignor",
}


def aiokafka_class(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


async def _poll(consumer: Any) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        while True:
            await consumer.getmany(timeout_ms=100)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
async def test_a_group_shared_with_an_aiokafka_member_using_the_same_class(
    kafka: Any, topic_name: str, name: str
) -> None:
    cls = aiokafka_class(ASSIGNORS[name])
    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)])
    group = f"{topic_name}-g"
    theirs = aiokafka.AIOKafkaConsumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        partition_assignment_strategy=(cls,),
    )
    ours = Consumer(
        topic_name,
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=group,
        partition_assignment_strategy=(cls,),  # aiokafka's class, passed as aiokafka code does
    )
    await theirs.start()
    await ours.start()
    pollers = [asyncio.ensure_future(_poll(c)) for c in (theirs, ours)]
    everything = {TopicPartition(topic_name, p) for p in range(4)}
    try:
        async with asyncio.timeout(45):
            while True:
                a, b = set(theirs.assignment()), set(ours.assignment())
                if a and b and not a & b and a | b == everything:
                    break
                await asyncio.sleep(0.1)
        async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
            described = (await admin.describe_consumer_groups([group]))[group]
        assert described.partition_assignor == name
    finally:
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        await ours.stop()
        await theirs.stop()
